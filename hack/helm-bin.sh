#!/usr/bin/env bash
# Build helm from its Go module into a cache outside the repository, as hack/kube-bin.sh does for
# the control plane.
#
#   hack/helm-bin.sh            # prints the path of the helm binary
#
# The module proxy serves helm.sh/helm/v3, so a one-line wrapper module requires it and builds
# helm's own cmd/helm. Builds only when missing; the binary is never committed. A cold build takes
# a few minutes on 2 idle cores (see tests/README.md); cached afterwards.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/hyperplace/helm-bin"
OUT="$CACHE/$HELM_VERSION"
# Bumped when the build itself changes, so a cached binary built the old way is rebuilt.
BUILD_ID="2"

missing() { [ ! -x "$OUT/helm" ] || [ "$(cat "$OUT/build-id" 2>/dev/null)" != "$BUILD_ID" ]; }

if missing; then
  command -v go >/dev/null 2>&1 || { echo "helm-bin: go not found on PATH" >&2; exit 1; }
  export GOTOOLCHAIN=local GOFLAGS="-mod=mod" CGO_ENABLED=0
  mkdir -p "$OUT"
  # One build at a time per cache: a second caller waits and then finds the binary cached.
  exec 9>"$CACHE/.lock"
  if ! flock -n 9; then
    echo "helm-bin: another build is running in $CACHE; waiting for it" >&2
    flock 9
  fi
fi

if missing; then
  src="$CACHE/src-$HELM_VERSION"
  mkdir -p "$src"
  cat >"$src/go.mod" <<GOMOD
module localbuild/helm

go 1.24.0

require helm.sh/helm/v3 $HELM_VERSION
GOMOD
  # A blank import keeps `go mod tidy` from dropping the requirement; the binary is helm's own main.
  cat >"$src/tools.go" <<'GO'
//go:build tools

// Package tools pins helm's command so `go mod tidy` keeps its dependencies.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
GO
  (
    cd "$src"
    go mod tidy >/dev/null
    echo "helm-bin: building helm $HELM_VERSION" >&2
    tmp="$(mktemp "$OUT/.helm.XXXXXX")"
    # As helm's Makefile does: the Kubernetes version `helm template` and `helm lint` assume
    # without a cluster is that of the client-go helm is built with (else v1.20).
    k8s="$(go list -m -f '{{.Version}}' k8s.io/client-go)"
    minor="${k8s#v0.}"; minor="${minor%%.*}"
    ld="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
    for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
      ld="$ld -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$minor"
    done
    go build -p 2 -trimpath -ldflags "$ld" -o "$tmp" helm.sh/helm/v3/cmd/helm
    chmod 755 "$tmp"
    mv "$tmp" "$OUT/helm"
    echo "$BUILD_ID" >"$OUT/build-id"
  )
fi

echo "$OUT/helm"
