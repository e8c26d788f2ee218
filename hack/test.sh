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
# The Go-built real components (hack/*-bin.sh: kube-apiserver, kube-controller-manager,
# kube-scheduler and etcd; helm; the workload controllers; Volcano's vc-scheduler), cached under
# ~/.cache/hyperplace and built the first time (cold: about 25 minutes on 2 cores; see tests/README.md). A build that cannot
# run (no Go, module proxy down, no snapshot) makes its tests skip with the reason, said loudly here.
build_log_dir="$(mktemp -d)"
go_builds() {
  # One build at a time: each saturates both cores. Each writes its last line (the path) or its
  # error to $build_log_dir. Arguments: the scripts, without hack/ and .sh.
  local script
  for script in "$@"; do
    if bash "hack/$script.sh" >"$build_log_dir/$script.out" 2>"$build_log_dir/$script.err"; then
      echo 0 >"$build_log_dir/$script.rc"
    else
      echo 1 >"$build_log_dir/$script.rc"
    fi
  done
}
# Export what the builds gave (or why they failed) for the tests that run the binaries.
export_builds() {
  local out err
  out="$(cat "$build_log_dir/kube-bin.out" 2>/dev/null)"; err="$build_log_dir/kube-bin.err"
  if [ "$(cat "$build_log_dir/kube-bin.rc")" = 0 ]; then
    export HYPERPLACE_KUBE_BIN="${out##*$'\n'}"
    unset HYPERPLACE_KUBE_BIN_ERROR
  else
    tail -n 30 "$err" >&2
    reason="$(tail -n 3 "$err" | tr '\n' ' ')"
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
  out="$(cat "$build_log_dir/helm-bin.out" 2>/dev/null)"; err="$build_log_dir/helm-bin.err"
  if [ "$(cat "$build_log_dir/helm-bin.rc")" = 0 ]; then
    export HYPERPLACE_HELM="${out##*$'\n'}"
    unset HYPERPLACE_HELM_ERROR
  else
    tail -n 30 "$err" >&2
    export HYPERPLACE_HELM_ERROR="$(tail -n 3 "$err" | tr '\n' ' ')"
    unset HYPERPLACE_HELM
    echo "WARNING: hack/helm-bin.sh could not build helm; the chart tests will be SKIPPED: $HYPERPLACE_HELM_ERROR" >&2
  fi
  out="$(cat "$build_log_dir/workload-bin.out" 2>/dev/null)"; err="$build_log_dir/workload-bin.err"
  if [ "$(cat "$build_log_dir/workload-bin.rc")" = 0 ]; then
    export HYPERPLACE_WORKLOAD_BIN="${out##*$'\n'}"
    unset HYPERPLACE_WORKLOAD_BIN_ERROR
  else
    export HYPERPLACE_WORKLOAD_BIN_ERROR="$(tail -n 3 "$err" | tr '\n' ' ')"
    unset HYPERPLACE_WORKLOAD_BIN
  fi
  if grep -q "unavailable" "$err" || [ -n "${HYPERPLACE_WORKLOAD_BIN_ERROR:-}" ]; then
    {
      echo "################################################################################"
      echo "WARNING: some workload controllers could not be built; their tests will be SKIPPED:"
      grep "unavailable\|failed" "$err" || true
      echo "################################################################################"
    } >&2
  fi
  grep "workload-bin: .* done in" "$err" >&2 || true
  # vc-scheduler: its tests (tests/integration/test_next_to_volcano.py) ask hack/volcano-bin.sh,
  # which finds it cached (or builds it there, when tests were named), or skip with its reason.
  if [ -f "$build_log_dir/volcano-bin.rc" ] && [ "$(cat "$build_log_dir/volcano-bin.rc")" != 0 ]; then
    echo "WARNING: hack/volcano-bin.sh could not build Volcano's scheduler; its tests will be SKIPPED: $(tail -n 3 "$build_log_dir/volcano-bin.err" | tr '\n' ' ')" >&2
  fi
}
# pytest's exit 5 is "no test collected": one phase may select nothing, the whole run may not.
ran_any=0
run_pytest() {
  set +e
  python -m pytest "$@"
  local rc=$?
  set -e
  if [ "$rc" -eq 5 ]; then return 0; fi
  ran_any=1
  return "$rc"
}
rc=0
if [ "$#" -eq 0 ]; then
  # The whole suite: the builds run in the background while the tests that need no Go binary
  # run (a cold build waits on the module proxy and on single-threaded links, which leaves a core
  # for pytest); then the tests that run the binaries (markers `apiserver` and `gobuilt`). The two
  # selections are each other's complement, so every test runs exactly once.
  echo "hack/test.sh: building the real components in the background (cached, or a cold build); meanwhile the tests that need none" >&2
  go_builds kube-bin helm-bin workload-bin volcano-bin &
  builds=$!
  run_pytest -m "not apiserver and not gobuilt" || rc=$?
  wait "$builds"
  export_builds
  run_pytest -m "apiserver or gobuilt" || rc=$?
else
  # Tests named on the command line: build first, then run them as asked; vc-scheduler only if
  # they include its test, which builds it on first use.
  go_builds kube-bin helm-bin workload-bin
  export_builds
  run_pytest "$@" || rc=$?
fi
rm -rf "$build_log_dir"
if [ "$ran_any" -eq 0 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$rc"
