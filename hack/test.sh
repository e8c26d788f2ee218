#!/usr/bin/env bash
# Set up the project's virtual environment (.venv) with the test extras and run the whole test
# suite in it. This is the README's test command; .ci/run runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
HYPERPLACE_EXTRAS=test . hack/venv.sh
hp_activate
# Headless Chromium for the HTML picture test (Debian packages); best effort, the
# test skips with a reason when no browser can be had.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || echo "chromium not installed; browser test will skip"
fi
# kube-apiserver + etcd for the real-apiserver tests (tests/integration, marker `apiserver`).
# Built from Go modules the first time (about 8.5 min on 2 idle cores), cached under ~/.cache afterwards. If
# the build cannot run (no Go, module proxy down) those tests skip with the reason; the rest of
# the suite does not need them, so CI does not fail for it.
kube_log="$(mktemp)"
echo "hack/test.sh: kube-apiserver, kube-controller-manager, etcd via hack/kube-bin.sh (cached, or an 8.5 min build)" >&2
if kube_bin="$(bash hack/kube-bin.sh 2>"$kube_log")"; then
  export HYPERPLACE_KUBE_BIN="${kube_bin##*$'\n'}"
  unset HYPERPLACE_KUBE_BIN_ERROR
else
  tail -n 30 "$kube_log" >&2
  reason="$(tail -n 3 "$kube_log" | tr '\n' ' ')"
  export HYPERPLACE_KUBE_BIN_ERROR="${reason:-hack/kube-bin.sh failed}"
  unset HYPERPLACE_KUBE_BIN
  {
    echo "################################################################################"
    echo "WARNING: hack/kube-bin.sh could not provide kube-apiserver/etcd:"
    echo "  $HYPERPLACE_KUBE_BIN_ERROR"
    echo "The real-apiserver tests (tests/integration) will be SKIPPED."
    echo "################################################################################"
  } >&2
fi
rm -f "$kube_log"
# helm, for the chart tests (tests/manifests/test_chart.py, tests/integration/test_helm_chart.py):
# built from its Go module the first time (about 3 min cold on 2 idle cores), cached afterwards.
helm_log="$(mktemp)"
if helm_path="$(bash hack/helm-bin.sh 2>"$helm_log")"; then
  export HYPERPLACE_HELM="${helm_path##*$'\n'}"
  unset HYPERPLACE_HELM_ERROR
else
  tail -n 30 "$helm_log" >&2
  export HYPERPLACE_HELM_ERROR="$(tail -n 3 "$helm_log" | tr '\n' ' ')"
  unset HYPERPLACE_HELM
  echo "WARNING: hack/helm-bin.sh could not build helm; the chart tests will be SKIPPED: $HYPERPLACE_HELM_ERROR" >&2
fi
rm -f "$helm_log"
# The real workload controllers (Kubeflow training operator, JobSet, LeaderWorkerSet) for
# tests/integration/test_workload_controllers.py, built like the control plane and cached under
# ~/.cache/hyperplace/workload-bin (cold build times: tests/README.md). A controller
# that cannot be built is skipped by its tests with the reason; this says so loudly here too.
workload_log="$(mktemp)"
echo "hack/test.sh: training operator, JobSet, LeaderWorkerSet via hack/workload-bin.sh (cached, or a cold build)" >&2
if workload_bin="$(bash hack/workload-bin.sh 2>"$workload_log")"; then
  export HYPERPLACE_WORKLOAD_BIN="${workload_bin##*$'\n'}"
  unset HYPERPLACE_WORKLOAD_BIN_ERROR
else
  export HYPERPLACE_WORKLOAD_BIN_ERROR="$(tail -n 3 "$workload_log" | tr '\n' ' ')"
  unset HYPERPLACE_WORKLOAD_BIN
fi
if grep -q "unavailable" "$workload_log" || [ -n "${HYPERPLACE_WORKLOAD_BIN_ERROR:-}" ]; then
  {
    echo "################################################################################"
    echo "WARNING: some workload controllers could not be built; their tests will be SKIPPED:"
    grep "unavailable\|failed" "$workload_log" || true
    echo "################################################################################"
  } >&2
fi
grep "workload-bin: .* done in" "$workload_log" >&2 || true
rm -f "$workload_log"
set +e
python -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$rc"
