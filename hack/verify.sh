#!/usr/bin/env bash
# Static checks a change must pass before review: lint, formatting, types, import contracts, and
# CRDs in sync with the models. Run from anywhere; exits non-zero on the first failing check.
set -euo pipefail
cd "$(dirname "$0")/.."
# The project's own virtual environment, with the dev extras (ruff, mypy, stubs).
HYPERPLACE_EXTRAS=dev . hack/venv.sh
hp_activate

step() { printf '\n==> %s\n' "$*"; }

step "ruff check"
ruff check .
step "ruff format --check"
ruff format --check .
step "mypy"
mypy                       # the packages listed in pyproject's [tool.mypy]
mypy hack/gen_crds.py
step "import contracts (pyproject [tool.importlinter])"
lint-imports --no-cache
step "CRDs match the models"
python hack/gen_crds.py --check
if [ -n "${CRDCHECK:-}" ]; then
  # Opt-in (needs Go and the module proxy): the CRDs through kube-apiserver's own validation code.
  step "CRDs admitted by k8s.io/apiextensions-apiserver"
  bash hack/crdcheck.sh
fi
echo
echo "verify: all checks passed"
