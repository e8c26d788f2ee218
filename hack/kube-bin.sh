#!/usr/bin/env bash
# Build the real control plane from Go modules into a cache outside the repository.
#
#   hack/kube-bin.sh                            # prints the directory holding the binaries below
#   K8S_VERSION=v1.34.10 hack/kube-bin.sh       # another release, by hand (CI builds the default only)
#
# That directory holds kube-apiserver, kube-controller-manager (garbage collection, namespace
# deletion), kube-scheduler (the oracle tests/oracle holds our filters against), etcd, and crdcheck
# (hack/crdcheck/main.go: kube-apiserver's own CRD validation code).
# The default, v1.37.2, is the release CI and hack/local-up.sh run (tests/README.md, "The Kubernetes
# release the tests run"); hyperplace/localup/controlplane.py turns its Workload API on.
# No registry ships a kube-apiserver binary and this project's machines have no Docker, so they are
# built: a wrapper module requires k8s.io/kubernetes and
# replaces every staging module with its published v0.Y.Z twin, with one main package per binary so
# the four share one compilation; etcd is a second wrapper module (kept apart so MVS cannot move
# kube-apiserver's etcd client). Builds only the binaries that are missing (each link takes a while,
# so one added binary does not relink the others); binaries are never committed.
# A cold build takes about 8 to 12 minutes on 2 cores (v1.37.2; see tests/README.md); cached afterwards.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.14}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/hyperplace/kube-bin"
OUT="$CACHE/$K8S_VERSION"
CRDCHECK_SRC="$HERE/crdcheck/main.go"
crdcheck_stamp="$(sha256sum "$CRDCHECK_SRC" | cut -d' ' -f1)"

# The binaries of the Kubernetes wrapper module that are missing (crdcheck also when its source
# changed), one a line.
kube_targets() {
  local b
  for b in kube-apiserver kube-controller-manager kube-scheduler; do
    [ -x "$OUT/$b" ] || echo "$b"
  done
  if [ ! -x "$OUT/crdcheck" ] || [ "$(cat "$OUT/crdcheck.stamp" 2>/dev/null)" != "$crdcheck_stamp" ]; then
    echo crdcheck
  fi
}
kube_missing() {
  [ -n "$(kube_targets)" ]
}
# Go is needed only to build: a machine with every binary cached works without it.
if kube_missing || [ ! -x "$OUT/etcd" ]; then
  command -v go >/dev/null 2>&1 || { echo "kube-bin: go not found on PATH" >&2; exit 1; }
fi
export GOTOOLCHAIN=local GOFLAGS="-mod=mod" CGO_ENABLED=0
mkdir -p "$OUT"
# One build at a time per cache: a second caller (another checkout, a test) waits for the first
# and then finds the binaries cached, instead of racing it over the same files.
if kube_missing || [ ! -x "$OUT/etcd" ]; then
  exec 9>"$CACHE/.lock"
  if ! flock -n 9; then
    echo "kube-bin: another build is running in $CACHE; waiting for it" >&2
    flock 9
  fi
fi

minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
patch="${K8S_VERSION##*.}"
staging_version="v0.${minor}.${patch}"

if kube_missing; then
  src="$CACHE/src-kube-$K8S_VERSION"
  mkdir -p "$src/kube-apiserver" "$src/kube-controller-manager" "$src/kube-scheduler" "$src/crdcheck"
  staging=(api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
    cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api cri-client
    csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms kube-aggregator
    kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics mount-utils
    pod-security-admission sample-apiserver sample-cli-plugin sample-controller)
  if [ "$minor" -ge 36 ]; then staging+=(cri-streaming streaming); fi
  # The wrapper's go directive must be at least k8s.io/kubernetes's own (1.24.0 for v1.34, 1.26.0
  # for v1.37), so it is read from that release's go.mod rather than fixed here.
  kube_gomod="$(cd "$src" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
    sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
  go_directive="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$kube_gomod")"
  [ -n "$go_directive" ] || { echo "kube-bin: no go directive in $kube_gomod" >&2; exit 1; }
  {
    echo "module localbuild/kube"
    echo
    echo "go $go_directive"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    for m in "${staging[@]}"; do echo "	k8s.io/$m => k8s.io/$m $staging_version"; done
    echo ")"
  } >"$src/go.mod"
  cat >"$src/kube-apiserver/main.go" <<'GO'
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
  cat >"$src/kube-controller-manager/main.go" <<'GO'
// Package main re-exports kube-controller-manager's command so it builds from the module proxy.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
GO
  cat >"$src/kube-scheduler/main.go" <<'GO'
// Package main re-exports kube-scheduler's command so it builds from the module proxy.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
GO
  cp "$CRDCHECK_SRC" "$src/crdcheck/main.go"
  (
    cd "$src"
    go mod tidy >/dev/null
    ld="-s -w"
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ld="$ld -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
    done
    mapfile -t targets < <(kube_targets)
    tmp="$(mktemp -d "$OUT/.build.XXXXXX")"
    echo "kube-bin: building ${targets[*]} $K8S_VERSION (cold: about 8 to 12 min on 2 cores)" >&2
    # -o DIR/ (the slash matters) writes each main package's binary into DIR, one package or several.
    go build -p 2 -trimpath -tags=notest,grpcnotrace -ldflags "$ld" -o "$tmp/" "${targets[@]/#/./}"
    mv "$tmp"/* "$OUT/"
    rmdir "$tmp"
    echo "$crdcheck_stamp" >"$OUT/crdcheck.stamp"
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
    echo "kube-bin: building etcd $ETCD_VERSION" >&2
    tmp="$(mktemp "$OUT/.etcd.XXXXXX")"
    go build -p 2 -trimpath -ldflags "-s -w" -o "$tmp" .
    chmod 755 "$tmp"
    mv "$tmp" "$OUT/etcd"
  )
fi

echo "$OUT"
