#!/usr/bin/env bash
# Build kube-apiserver and etcd from their Go modules into a cache outside the repository.
#
#   hack/kube-bin.sh            # prints the directory holding kube-apiserver and etcd
#
# No registry ships a kube-apiserver binary and this project's machines have no Docker, so
# integration tests against a real control plane build one (see shared/research/control-plane.md):
# a wrapper module requires k8s.io/kubernetes and replaces every staging module with its published
# v0.Y.Z twin; etcd is a second wrapper module (kept apart so MVS cannot move kube-apiserver's etcd
# client). Builds only what is missing; binaries are never committed.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.34.10}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.14}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/hyperplace/kube-bin"
OUT="$CACHE/$K8S_VERSION"
# Go is needed only to build: a machine with both binaries cached works without it.
if [ ! -x "$OUT/kube-apiserver" ] || [ ! -x "$OUT/etcd" ]; then
  command -v go >/dev/null 2>&1 || { echo "kube-bin: go not found on PATH" >&2; exit 1; }
fi
export GOTOOLCHAIN=local GOFLAGS="-mod=mod" CGO_ENABLED=0
mkdir -p "$OUT"

minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
patch="${K8S_VERSION##*.}"
staging_version="v0.${minor}.${patch}"

if [ ! -x "$OUT/kube-apiserver" ]; then
  src="$CACHE/src-apiserver-$K8S_VERSION"
  mkdir -p "$src"
  staging=(api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
    cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api cri-client
    csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms kube-aggregator
    kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics mount-utils
    pod-security-admission sample-apiserver sample-cli-plugin sample-controller)
  if [ "$minor" -ge 36 ]; then staging+=(cri-streaming streaming); fi
  {
    echo "module localbuild/kube-apiserver"
    echo
    echo "go 1.24.0"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    for m in "${staging[@]}"; do echo "	k8s.io/$m => k8s.io/$m $staging_version"; done
    echo ")"
  } >"$src/go.mod"
  cat >"$src/main.go" <<'GO'
// Package main re-exports kube-apiserver's command so it builds from the module proxy.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
GO
  (
    cd "$src"
    go mod tidy >/dev/null
    ld="-s -w"
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ld="$ld -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
    done
    go build -p 2 -trimpath -tags=notest,grpcnotrace -ldflags "$ld" -o "$OUT/kube-apiserver.tmp" .
    mv "$OUT/kube-apiserver.tmp" "$OUT/kube-apiserver"
  )
fi

if [ ! -x "$OUT/etcd" ]; then
  src="$CACHE/src-etcd-$ETCD_VERSION"
  mkdir -p "$src"
  cat >"$src/go.mod" <<GOMOD
module localbuild/etcd

go 1.25.0

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
GOMOD
  cat >"$src/main.go" <<'GO'
// Package main runs etcd's own main so it builds from the module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
GO
  (
    cd "$src"
    go mod tidy >/dev/null
    go build -p 2 -trimpath -ldflags "-s -w" -o "$OUT/etcd.tmp" .
    mv "$OUT/etcd.tmp" "$OUT/etcd"
  )
fi

echo "$OUT"
