#!/usr/bin/env bash
# Set up the project's virtual environment (.venv) and run the main job: the embedded simulator on
# a bundled example. Extra arguments go to `hyperplace simulate` (e.g. --output json, --html out.html).
set -euo pipefail
cd "$(dirname "$0")/.."
HYPERPLACE_EXTRAS="" . hack/venv.sh
hp_activate
exec hyperplace simulate examples/user-guide-3.3 "$@"
