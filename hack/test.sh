#!/usr/bin/env bash
# Install the suite with its test extras and run the whole test suite.
# This is the README's test command; .ci/run runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --disable-pip-version-check -q -e '.[test]'
# Headless Chromium for the HTML picture test (Debian packages); best effort, the
# test skips with a reason when no browser can be had.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || echo "chromium not installed; browser test will skip"
fi
set +e
python3 -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$rc"
