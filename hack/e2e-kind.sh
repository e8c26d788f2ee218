#!/usr/bin/env bash
# Opt-in end-to-end test on kind: HyperNodes over the kind workers, a gang Job with a hard tier-1
# constraint, and a check that every pod runs inside one tier-1 HyperNode.
# Exits 0 with a message (a skip, not a pass) when Docker, a Docker daemon or kind is missing, so
# it is safe to call from scripts on machines without them.
#
#   hack/e2e-kind.sh             # uses/creates cluster "hyperplace" via hack/kind-up.sh
#   KEEP_CLUSTER=1 hack/e2e-kind.sh
set -euo pipefail
cd "$(dirname "$0")/.."

skip() { echo "SKIP e2e-kind: $*"; exit 0; }
command -v docker >/dev/null 2>&1 || skip "docker not installed"
command -v kind >/dev/null 2>&1 || skip "kind not installed"
command -v kubectl >/dev/null 2>&1 || skip "kubectl not installed"
docker info >/dev/null 2>&1 || skip "no reachable Docker daemon"

CLUSTER="${KIND_CLUSTER_NAME:-hyperplace}"
export KIND_CLUSTER_NAME="$CLUSTER" WORKERS="${WORKERS:-4}"
bash hack/kind-up.sh

cleanup() {
  kubectl delete namespace hyperplace-e2e --ignore-not-found --wait=false >/dev/null 2>&1 || true
  kubectl delete hypernodes -l hyperplace-e2e=true --ignore-not-found >/dev/null 2>&1 || true
  if [ -z "${KEEP_CLUSTER:-}" ]; then kind delete cluster --name "$CLUSTER"; fi
}
trap cleanup EXIT

mapfile -t workers < <(kubectl get nodes -l '!node-role.kubernetes.io/control-plane' \
  -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort)
[ "${#workers[@]}" -ge 4 ] || { echo "e2e-kind: need at least 4 workers, have ${#workers[@]}" >&2; exit 1; }

# Two tier-1 HyperNodes of two workers each under one tier-2 root.
hn() { # name tier type member...
  local name=$1 tier=$2 type=$3; shift 3
  echo "---"
  echo "apiVersion: topology.volcano.sh/v1alpha1"
  echo "kind: HyperNode"
  echo "metadata: {name: $name, labels: {hyperplace-e2e: \"true\"}}"
  echo "spec:"
  echo "  tier: $tier"
  echo "  members:"
  for m in "$@"; do echo "    - {type: $type, selector: {exactMatch: {name: $m}}}"; done
}
{
  hn e2e-s0 1 Node "${workers[0]}" "${workers[1]}"
  hn e2e-s1 1 Node "${workers[2]}" "${workers[3]}"
  hn e2e-s2 2 HyperNode e2e-s0 e2e-s1
} | kubectl apply -f -

kubectl create namespace hyperplace-e2e --dry-run=client -o yaml | kubectl apply -f -
kubectl apply -f - <<'JOB'
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: tier1-gang
  namespace: hyperplace-e2e
spec:
  schedulerName: volcano
  minAvailable: 2
  networkTopology:
    mode: hard
    highestTierAllowed: 1
  tasks:
    - name: t0
      replicas: 2
      template:
        spec:
          restartPolicy: Never
          containers:
            - name: c0
              image: hyperplace:0.1.0
              command: [python, -c, "import time; time.sleep(600)"]
              resources:
                requests: {cpu: 10m, memory: 16Mi}
JOB

echo "waiting for the gang to be bound"
for _ in $(seq 1 60); do
  bound=$(kubectl -n hyperplace-e2e get pods -l volcano.sh/job-name=tier1-gang \
    -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c . || true)
  [ "$bound" -ge 2 ] && break
  sleep 3
done
mapfile -t nodes < <(kubectl -n hyperplace-e2e get pods -l volcano.sh/job-name=tier1-gang \
  -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep . | sort -u)
if [ "${#nodes[@]}" -eq 0 ]; then
  kubectl -n hyperplace-e2e get pods,podgroups -o wide || true
  echo "FAIL e2e-kind: no pod of the job was bound" >&2; exit 1
fi
in_s0=0 in_s1=0
for n in "${nodes[@]}"; do
  case "$n" in
    "${workers[0]}" | "${workers[1]}") in_s0=1 ;;
    "${workers[2]}" | "${workers[3]}") in_s1=1 ;;
  esac
done
if [ $((in_s0 + in_s1)) -ne 1 ]; then
  echo "FAIL e2e-kind: pods span tier-1 HyperNodes: ${nodes[*]}" >&2; exit 1
fi
kubectl get hypernodes -l hyperplace-e2e=true
echo "PASS e2e-kind: gang bound inside one tier-1 HyperNode (${nodes[*]})"
