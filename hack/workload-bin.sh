#!/usr/bin/env bash
# Build the real workload controllers (Kubeflow training operator, JobSet, LeaderWorkerSet) into a
# cache outside the repository, as hack/kube-bin.sh builds the control plane.
#
#   hack/workload-bin.sh [training-operator] [jobset] [lws]   # default: all three
#
# Prints the cache directory last. Under it, per controller, <name>-<version>/ holds the binary
# (`manager`) and its CRDs (crds/*.yaml); a controller that cannot be built gets
# <name>-<version>.unavailable instead, one line saying why (the tests skip it, loudly, with that
# line), and the others are still built. The script fails only when none could be had.
#
# * training operator: served by the Go module proxy (github.com/kubeflow/training-operator);
#   built from a wrapper module as `go build .../cmd/training-operator.v1`.
# * JobSet and LeaderWorkerSet: not served by the proxy (403), so built from a snapshot of their
#   Git repositories at a release tag ($HYPERPLACE_JOBSET_GIT / $HYPERPLACE_LWS_GIT: a clone or a
#   bare git directory; default: the snapshot under /work/.mirror, else a clone from GitHub),
#   with `go build` of their main package as their Makefiles do; their dependencies come from
#   the module proxy.
# Builds only what is missing; binaries are never committed. Cold build times on 2 idle cores are
# in tests/README.md.
set -euo pipefail

TRAINING_OPERATOR_VERSION="${TRAINING_OPERATOR_VERSION:-v1.8.1}"
JOBSET_VERSION="${JOBSET_VERSION:-v0.12.0}"
LWS_VERSION="${LWS_VERSION:-v0.10.0}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/hyperplace/workload-bin"
mkdir -p "$CACHE"
export GOTOOLCHAIN=local GOFLAGS="-mod=mod" CGO_ENABLED=0

want=("$@")
[ "${#want[@]}" -gt 0 ] || want=(training-operator jobset lws)

# One build at a time per cache (another checkout or test waits, then finds them cached).
exec 9>"$CACHE/.lock"
if ! flock -n 9; then
  echo "workload-bin: another build is running in $CACHE; waiting for it" >&2
  flock 9
fi

unavailable() { # name-version, reason
  echo "$2" >"$CACHE/$1.unavailable"
  echo "workload-bin: $1 unavailable: $2" >&2
}

timed_build() { # label, command...
  local start end
  start=$(date +%s)
  "${@:2}"
  end=$(date +%s)
  echo "workload-bin: built $1 in $((end - start)) s" >&2
}

# A source tree of a Git repository at a tag: from $1 (a clone or bare git dir), else GitHub.
checkout() { # git-dir-or-empty, url, tag, dest
  local gitdir="$1" url="$2" tag="$3" dest="$4"
  rm -rf "$dest"
  mkdir -p "$dest"
  # The build needs the code, not the documentation site (a snapshot may leave its large files out).
  local g=()
  if [ -n "$gitdir" ] && git --git-dir="$gitdir" rev-parse -q --verify "refs/tags/$tag" >/dev/null 2>&1; then
    g=(git --git-dir="$gitdir")
  elif [ -n "$gitdir" ] && git -C "$gitdir" rev-parse -q --verify "refs/tags/$tag" >/dev/null 2>&1; then
    g=(git -C "$gitdir")
  fi
  if [ "${#g[@]}" -gt 0 ]; then
    local paths
    paths="$("${g[@]}" ls-tree --name-only "$tag" | grep -vxE 'site|docs|\.github')"
    # shellcheck disable=SC2086 # one path per top-level entry
    "${g[@]}" archive "$tag" -- $paths | tar -x -C "$dest" || return 1
  else
    git clone -q --depth 1 --branch "$tag" "$url" "$dest.clone" 2>/dev/null || return 1
    git -C "$dest.clone" archive "$tag" | tar -x -C "$dest"
    rm -rf "$dest.clone"
  fi
}

build_training_operator() {
  local id="training-operator-$TRAINING_OPERATOR_VERSION" out src
  out="$CACHE/$id"
  [ -x "$out/manager" ] && return 0
  command -v go >/dev/null 2>&1 || { unavailable "$id" "go not found on PATH"; return 0; }
  rm -f "$CACHE/$id.unavailable"
  src="$CACHE/src-$id"
  mkdir -p "$src" "$out.tmp/crds"
  cat >"$src/go.mod" <<GOMOD
module localbuild/trainingoperator

go 1.22

require github.com/kubeflow/training-operator $TRAINING_OPERATOR_VERSION
GOMOD
  cat >"$src/tools.go" <<'GO'
//go:build tools

// Package tools pins the training operator's command as a dependency of this wrapper module.
package tools

import _ "github.com/kubeflow/training-operator/cmd/training-operator.v1"
GO
  if ! (
    cd "$src"
    go mod tidy >/dev/null 2>&1 || go get "github.com/kubeflow/training-operator/cmd/training-operator.v1@$TRAINING_OPERATOR_VERSION" >/dev/null
    echo "workload-bin: building the training operator $TRAINING_OPERATOR_VERSION (module proxy)" >&2
    timed_build "training-operator" go build -p 2 -trimpath -ldflags "-s -w" -o "$out.tmp/manager" \
      github.com/kubeflow/training-operator/cmd/training-operator.v1
    dir="$(go list -m -f '{{.Dir}}' github.com/kubeflow/training-operator)"
    cp "$dir"/manifests/base/crds/kubeflow.org_*.yaml "$out.tmp/crds/"
  ); then
    rm -rf "$out.tmp"
    unavailable "$id" "go build of github.com/kubeflow/training-operator $TRAINING_OPERATOR_VERSION failed"
    return 0
  fi
  chmod -R u+w "$out.tmp"
  rm -rf "$out"
  mv "$out.tmp" "$out"
}

build_from_git() { # name, version, git dir, url, main package, crd glob, webhook manifests
  local name="$1" version="$2" gitdir="$3" url="$4" main="$5" crds="$6" webhooks="$7"
  local id="$name-$version" out="$CACHE/$name-$version" src="$CACHE/src-$name-$version"
  [ -x "$out/manager" ] && return 0
  command -v go >/dev/null 2>&1 || { unavailable "$id" "go not found on PATH"; return 0; }
  rm -f "$CACHE/$id.unavailable"
  if ! checkout "$gitdir" "$url" "$version" "$src"; then
    unavailable "$id" "no source: no snapshot of $url at $version (set HYPERPLACE_${name^^}_GIT) and no clone from GitHub"
    return 0
  fi
  mkdir -p "$out.tmp/crds"
  if ! (
    cd "$src"
    echo "workload-bin: building $name $version (snapshot at the tag, dependencies from the module proxy)" >&2
    timed_build "$name" go build -p 2 -trimpath -ldflags "-s -w" -o "$out.tmp/manager" "$main"
    # shellcheck disable=SC2086 # the glob is meant to expand
    cp $crds "$out.tmp/crds/"
    # Its webhook configurations (served by the manager; local-up points them at 127.0.0.1).
    cp "$webhooks" "$out.tmp/webhooks.yaml"
  ); then
    rm -rf "$out.tmp"
    unavailable "$id" "go build of $name $version failed"
    return 0
  fi
  rm -rf "$out"
  mv "$out.tmp" "$out"
}

mirror() { # owner+name -> the snapshot's git dir when there is one
  local d="/work/.mirror/$1/repo"
  [ -d "$d" ] && echo "$d" || true
}

for w in "${want[@]}"; do
  t0=$(date +%s)
  case "$w" in
    training-operator) build_training_operator ;;
    jobset)
      build_from_git jobset "$JOBSET_VERSION" "${HYPERPLACE_JOBSET_GIT:-$(mirror kubernetes-sigs+jobset)}" \
        https://github.com/kubernetes-sigs/jobset ./main.go "config/components/crd/bases/*.yaml" \
        config/components/webhook/manifests.yaml
      ;;
    lws)
      build_from_git lws "$LWS_VERSION" "${HYPERPLACE_LWS_GIT:-$(mirror kubernetes-sigs+lws)}" \
        https://github.com/kubernetes-sigs/lws ./cmd "config/crd/bases/leaderworkerset.x-k8s.io_*.yaml" \
        config/webhook/manifests.yaml
      ;;
    *) echo "workload-bin: unknown controller $w (training-operator, jobset, lws)" >&2; exit 2 ;;
  esac
  echo "workload-bin: $w done in $(($(date +%s) - t0)) s (sources, module downloads and build)" >&2
done

built=0
for d in "$CACHE"/*/manager; do [ -x "$d" ] && built=$((built + 1)); done
[ "$built" -gt 0 ] || { echo "workload-bin: no controller could be built" >&2; exit 1; }
echo "$CACHE"
