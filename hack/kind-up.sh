#!/usr/bin/env bash
# Opt-in: bring up a local kind cluster running hyperplace end to end.
# Needs Docker (a running daemon), kind, kubectl and this repo installed (`pip install -e .`, for
# the hyperplace-certs console script). CI does not run this; it needs no network beyond what
# `docker build` and kind's node image need.
#
#   hack/kind-up.sh                # create (or reuse) cluster "hyperplace", build, load, deploy
#   KIND_CLUSTER_NAME=x WORKERS=4 hack/kind-up.sh
#
# The CA and serving certificate are kept in $CERT_DIR (outside the repository) so re-running keeps
# the same CA; `hyperplace-certs gen` only renews the serving pair.
set -euo pipefail
cd "$(dirname "$0")/.."

CLUSTER="${KIND_CLUSTER_NAME:-hyperplace}"
IMAGE="${IMAGE:-hyperplace:0.1.0}"
NS=hyperplace-system
WORKERS="${WORKERS:-4}"
CERT_DIR="${CERT_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hyperplace/kind-$CLUSTER-certs}"

log() { printf '\n==> %s\n' "$*"; }
need() { command -v "$1" >/dev/null 2>&1 || { echo "kind-up: '$1' not found on PATH" >&2; exit 1; }; }

need docker
need kind
need kubectl
need hyperplace-certs
docker info >/dev/null 2>&1 || { echo "kind-up: the Docker daemon is not reachable" >&2; exit 1; }

if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  log "reusing kind cluster $CLUSTER"
else
  log "creating kind cluster $CLUSTER with $WORKERS workers"
  config="$(mktemp)"
  trap 'rm -f "$config"' EXIT
  {
    echo "kind: Cluster"
    echo "apiVersion: kind.x-k8s.io/v1alpha4"
    echo "nodes:"
    echo "  - role: control-plane"
    for _ in $(seq 1 "$WORKERS"); do echo "  - role: worker"; done
  } >"$config"
  kind create cluster --name "$CLUSTER" --config "$config" --wait 120s
fi
kubectl config use-context "kind-$CLUSTER" >/dev/null

log "building $IMAGE and loading it into the cluster"
docker build -t "$IMAGE" .
kind load docker-image "$IMAGE" --name "$CLUSTER"

log "installing CRDs"
kubectl apply -f manifests/crds/
kubectl wait --for condition=established --timeout=60s \
  crd/hypernodes.topology.volcano.sh crd/jobs.batch.volcano.sh \
  crd/podgroups.scheduling.volcano.sh crd/queues.scheduling.volcano.sh \
  crd/commands.bus.volcano.sh
kubectl apply -f manifests/default-queue.yaml

log "serving certificate for the webhooks"
kubectl apply -f manifests/namespace.yaml
hyperplace-certs gen --service hyperplace-webhooks --namespace "$NS" --out-dir "$CERT_DIR"
# --with-ca-key: the webhook server renews its own serving certificate before it expires.
hyperplace-certs secret --service hyperplace-webhooks --namespace "$NS" --name hyperplace-webhooks-tls \
  --from-dir "$CERT_DIR" --with-ca-key | kubectl apply -f -

log "deploying hyperplace"
kubectl apply -k manifests/
# The configurations exist now; put the CA in them (the webhook server does this at start-up as
# well, this just removes the race).
hyperplace-certs inject --ca-file "$CERT_DIR/ca.crt" --context "kind-$CLUSTER" \
  --validating hyperplace-validating-webhooks --mutating hyperplace-mutating-webhooks

for d in hyperplace-webhooks hyperplace-controller hyperplace-scheduler; do
  kubectl -n "$NS" rollout status "deployment/$d" --timeout=180s
done
log "hyperplace is up on kind-$CLUSTER"
