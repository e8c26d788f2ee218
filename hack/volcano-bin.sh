#!/usr/bin/env bash
# Build Volcano's own scheduler (vc-scheduler, cmd/scheduler) into a cache outside the repository,
# for the test that runs it next to ours (tests/integration/test_next_to_volcano.py).
#
#   hack/volcano-bin.sh            # prints the path of vc-scheduler
#
# Volcano's own CRDs of the same release are copied beside it (crds/), for the ones a cluster with
# only hyperplace's CRDs lacks but vc-scheduler watches (nodeinfo.volcano.sh numatopologies).
#
# The Go module proxy does not serve volcano.sh/volcano, so the source is a snapshot of the
# volcano-sh/volcano repository at a release tag: $HYPERPLACE_VOLCANO_SRC (a git directory holding
# the tag, or a source tree of that release), else the snapshot the search tool's `fetch
# github:volcano-sh/volcano` leaves in /work/.mirror. Built as its Makefile builds vc-scheduler
# (CGO off, `go build ./cmd/scheduler`), with the module proxy for its dependencies. Builds only
# when missing; the binary is never committed. Exits 1 saying why when there is no source or Go.
set -euo pipefail

VOLCANO_VERSION="${VOLCANO_VERSION:-v1.15.1}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/hyperplace/volcano-bin"
OUT="$CACHE/$VOLCANO_VERSION"
SRC="${HYPERPLACE_VOLCANO_SRC:-/work/.mirror/volcano-sh+volcano/repo}"

missing() { [ ! -x "$OUT/vc-scheduler" ] || [ ! -d "$OUT/crds" ]; }

if missing; then
  command -v go >/dev/null 2>&1 || { echo "volcano-bin: go not found on PATH" >&2; exit 1; }
  export GOTOOLCHAIN=local GOFLAGS="-mod=mod" CGO_ENABLED=0
  mkdir -p "$OUT"
  exec 9>"$CACHE/.lock"
  if ! flock -n 9; then
    echo "volcano-bin: another build is running in $CACHE; waiting for it" >&2
    flock 9
  fi
fi

if missing; then
  tree="$CACHE/src-$VOLCANO_VERSION"
  if [ ! -f "$tree/go.mod" ]; then
    rm -rf "$tree"
    mkdir -p "$tree"
    if git --git-dir="$SRC" rev-parse --verify -q "$VOLCANO_VERSION^{commit}" >/dev/null 2>&1; then
      git --git-dir="$SRC" archive "$VOLCANO_VERSION" | tar -x -C "$tree"
    elif [ -f "$SRC/go.mod" ] && grep -q '^module volcano.sh/volcano$' "$SRC/go.mod"; then
      cp -a "$SRC/." "$tree/"
    else
      rmdir "$tree"
      echo "volcano-bin: no volcano-sh/volcano source at $VOLCANO_VERSION in $SRC (set HYPERPLACE_VOLCANO_SRC to a git directory with that tag, or fetch github:volcano-sh/volcano)" >&2
      exit 1
    fi
  fi
  if [ ! -d "$OUT/crds" ]; then
    mkdir -p "$OUT/.crds.tmp"
    cp "$tree"/config/crd/volcano/bases/*.yaml "$OUT/.crds.tmp/"
    mv "$OUT/.crds.tmp" "$OUT/crds"
  fi
fi

if [ ! -x "$OUT/vc-scheduler" ]; then
  (
    cd "$tree"
    echo "volcano-bin: building vc-scheduler $VOLCANO_VERSION" >&2
    tmp="$(mktemp "$OUT/.vc-scheduler.XXXXXX")"
    go build -p 2 -trimpath -ldflags "-s -w -X volcano.sh/volcano/pkg/version.GitVersion=$VOLCANO_VERSION" \
      -o "$tmp" ./cmd/scheduler
    chmod 755 "$tmp"
    mv "$tmp" "$OUT/vc-scheduler"
  )
fi

echo "$OUT/vc-scheduler"
