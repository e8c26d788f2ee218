#!/usr/bin/env bash
# Opt-in: bring up a local kind cluster running hyperplace end to end.
# Needs Docker (a running daemon), kind, kubectl and this repo installed (`pip install -e .`, for
# the hyperplace-certs console script). CI does not run this; it needs no network beyond what
# `docker build` and kind's node image need.
#
#   hack/kind-up.sh                # create (or reuse) cluster "hyperplace", build, load, deploy
#   KIND_CLUSTER_NAME=x WORKERS=4 hack/kind-up.sh
#
# The certificate steps call the hyperplace-certs CLI; override CERTS_GEN_CMD / CERTS_INJECT_CMD if
# its flags differ from the ones below.
set -euo pipefail
cd "$(dirname "$0")/.."

CLUSTER="${KIND_CLUSTER_NAME:-hyperplace}"
IMAGE="${IMAGE:-hyperplace:0.1.0}"
NS=hyperplace-system
WORKERS="${WORKERS:-4}"
CERTS_GEN_CMD="${CERTS_GEN_CMD:-hyperplace-certs gen --namespace $NS --service hyperplace-webhooks --secret hyperplace-webhooks-tls}"
CERTS_INJECT_CMD="${CERTS_INJECT_CMD:-hyperplace-certs inject --namespace $NS --secret hyperplace-webhooks-tls --validating hyperplace-validating-webhooks --mutating hyperplace-mutating-webhooks}"

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
  crd/podgroups.scheduling.volcano.sh crd/queues.scheduling.volcano.sh
kubectl apply -f manifests/default-queue.yaml

log "serving certificate for the webhooks"
kubectl apply -f manifests/namespace.yaml
$CERTS_GEN_CMD

log "deploying hyperplace"
kubectl apply -k manifests/
# The configurations exist now; put the CA in them (the webhook server does this at start-up as
# well, this just removes the race).
$CERTS_INJECT_CMD

for d in hyperplace-webhooks hyperplace-controller hyperplace-scheduler; do
  kubectl -n "$NS" rollout status "deployment/$d" --timeout=180s
done
log "hyperplace is up on kind-$CLUSTER"
