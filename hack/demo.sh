#!/usr/bin/env bash
# Install the suite and run the main job: the embedded simulator on a bundled example.
# Extra arguments go to `hyperplace simulate` (e.g. --output json, --html out.html).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --disable-pip-version-check -q -e .
exec hyperplace simulate examples/user-guide-3.3 "$@"
