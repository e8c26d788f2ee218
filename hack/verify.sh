#!/usr/bin/env bash
# Static checks a change must pass before review: lint, formatting, types, and CRDs in sync with
# the models. Run from anywhere; exits non-zero on the first failing check.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "ruff check"
ruff check .
step "ruff format --check"
ruff format --check .
step "mypy"
mypy                       # the packages listed in pyproject's [tool.mypy]
mypy hack/gen_crds.py
step "CRDs match the models"
python hack/gen_crds.py --check
echo
echo "verify: all checks passed"
