#!/usr/bin/env bash
# A real control plane with hyperplace on it, on this machine, with no container runtime.
#
#   hack/local-up.sh [--nodes 16] [--gpus-per-node 8] [--topology leaf-spine|none]   # start
#   hack/local-up.sh --with jobset,lws,training-operator   # also the real workload controllers
#   hack/local-up.sh --helm ...                                                       # install through charts/hyperplace
#   hack/local-up.sh status                                                           # what runs
#   hack/local-up.sh down                                                             # stop, clean up
#   hack/local-up.sh node stop NAME / node start NAME     # a node's fake kubelet dies / comes back
#
# Starts etcd, kube-apiserver and kube-controller-manager (built by hack/kube-bin.sh), applies the
# CRDs, RBAC and ConfigMaps from manifests/, generates the webhook certificates (and the client
# certificate the apiserver must present to the webhooks, through its AdmissionConfiguration;
# --no-webhook-mtls turns that requirement off) and runs
# hyperplace-webhooks, hyperplace-controller, hyperplace-scheduler and a fake kubelet (nodes Ready,
# bound pods Running, no containers) from the project's .venv. Then it creates the fake nodes and
# their HyperNode tree and prints the kubeconfig path and an `export KUBECONFIG=...` line:
#
#   eval "$(hack/local-up.sh | tail -1)"
#
# State, logs and process ids live in ${XDG_STATE_HOME:-~/.local/state}/hyperplace/local-up
# (or $HYPERPLACE_LOCAL_UP_DIR); `down` stops exactly the processes `up` started and removes it.
# Needs kubectl on PATH; the first run builds the Kubernetes binaries (needs Go; about 8 to 12 min on 2 cores).
# With --helm the CRDs, Queue, RBAC, ConfigMaps and webhook configurations come from `helm install`
# of charts/hyperplace (helm built by hack/helm-bin.sh) instead of kubectl apply of manifests/.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
cd "$HERE/.."

cmd=up
case "${1:-}" in
  up | down | status | node) cmd="$1"; shift ;;
  -h | --help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
state_args=()
if [ -n "${HYPERPLACE_LOCAL_UP_DIR:-}" ]; then state_args=(--state-dir "$HYPERPLACE_LOCAL_UP_DIR"); fi

# The project's .venv (created and kept up to date by hack/venv.sh), unless a virtual environment
# with hyperplace in it is active already (the integration tests run this script from theirs).
if [ -z "${VIRTUAL_ENV:-}" ] || ! "$VIRTUAL_ENV/bin/python" -c 'import hyperplace.localup' 2>/dev/null; then
  # shellcheck source=hack/venv.sh
  . hack/venv.sh
  hp_activate >&2
fi

if [ "$cmd" != up ]; then
  exec "$VIRTUAL_ENV/bin/python" -m hyperplace.localup "${state_args[@]}" "$cmd" "$@"
fi
args=()
for a in "$@"; do
  if [ "$a" = --helm ]; then
    helm="${HYPERPLACE_HELM:-}"
    if [ -z "$helm" ]; then
      echo "local-up: looking for helm (hack/helm-bin.sh; the first build takes about 3 min)" >&2
      helm="$(bash hack/helm-bin.sh | tail -1)"
    fi
    args+=(--helm "$helm")
  else
    args+=("$a")
  fi
done
set -- "${args[@]+"${args[@]}"}"
bin_dir="${HYPERPLACE_KUBE_BIN:-}"
if [ -z "$bin_dir" ]; then
  echo "local-up: looking for the Kubernetes binaries (hack/kube-bin.sh; the first build takes about 8 to 12 min)" >&2
  bin_dir="$(bash hack/kube-bin.sh | tail -1)"
fi
# --with NAMES: the real workload controllers, built (or found cached) by hack/workload-bin.sh.
workload_args=()
prev=""
for a in "$@"; do
  if [ "$prev" = "--with" ] || [[ "$a" == --with=* ]]; then
    names="${a#--with=}"
    wl_dir="${HYPERPLACE_WORKLOAD_BIN:-}"
    if [ -z "$wl_dir" ]; then
      echo "local-up: building or finding ${names//,/ } (hack/workload-bin.sh)" >&2
      # shellcheck disable=SC2046 # one argument per controller
      wl_dir="$(bash hack/workload-bin.sh $(echo "$names" | tr ',' ' ') | tail -1)"
    fi
    workload_args=(--workload-bin-dir "$wl_dir")
  fi
  prev="$a"
done
exec "$VIRTUAL_ENV/bin/python" -m hyperplace.localup "${state_args[@]}" up --bin-dir "$bin_dir" ${workload_args[@]+"${workload_args[@]}"} "$@"
