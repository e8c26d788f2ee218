# Sourced by hack/demo.sh and hack/test.sh: create (once) and activate the project's own virtual
# environment in .venv, installing the suite with the extras given in $HYPERPLACE_EXTRAS.
#
# It never installs into the interpreter it finds (a stock Debian/Ubuntu Python is "externally
# managed" and refuses that anyway). The interpreter is $PYTHON if set, else the first of python3,
# python3.13, python3.12, python3.11 on PATH that is Python >= 3.11. The install is skipped while
# pyproject.toml and the extras are unchanged, so the second run costs about a second.
# shellcheck shell=bash

hp_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
hp_venv="${HYPERPLACE_VENV:-$hp_root/.venv}"
hp_extras="${HYPERPLACE_EXTRAS:-}"

hp_find_python() {
  local cand found=""
  for cand in ${PYTHON:-} python3 python3.13 python3.12 python3.11; do
    command -v "$cand" >/dev/null 2>&1 || continue
    if "$cand" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      command -v "$cand"
      return 0
    fi
    found="${found:+$found, }$cand is $("$cand" -c 'import platform; print(platform.python_version())' 2>/dev/null || echo '?')"
  done
  echo "hyperplace needs Python >= 3.11; found: ${found:-no python3 on PATH}. Install one (or set PYTHON=/path/to/python3.11)." >&2
  return 1
}

hp_make_venv() {
  local py
  py="$(hp_find_python)" || return 1
  echo "venv: creating $hp_venv with $py ($("$py" -c 'import platform; print(platform.python_version())'))" >&2
  if ! "$py" -m venv "$hp_venv" 2>/tmp/hyperplace-venv.err; then
    rm -rf "$hp_venv"
    # Debian/Ubuntu split venv's ensurepip into pythonX.Y-venv; as root we can install it.
    local ver pkg
    ver="$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
    pkg="python${ver}-venv"
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "venv: $py has no working venv module; installing $pkg" >&2
      { apt-get update -qq && apt-get install -y -qq "$pkg" >/dev/null; } || true
    fi
    if ! "$py" -m venv "$hp_venv"; then
      rm -rf "$hp_venv"
      echo "venv: '$py -m venv' failed (on Debian/Ubuntu: apt-get install $pkg):" >&2
      cat /tmp/hyperplace-venv.err >&2
      return 1
    fi
  fi
}

hp_activate() {
  if [ ! -x "$hp_venv/bin/python" ] || ! "$hp_venv/bin/python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
    rm -rf "$hp_venv"
    hp_make_venv || return 1
  fi
  local stamp want
  want="$(cat "$hp_root/pyproject.toml" | sha256sum | cut -d' ' -f1) extras=[$hp_extras]"
  stamp="$hp_venv/.hyperplace-installed"
  # A venv installed with more extras serves a run that needs fewer.
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] && ! grep -qxF "$want" "$hp_venv/.hyperplace-installed-all" 2>/dev/null; then
    local spec="$hp_root"
    [ -n "$hp_extras" ] && spec="$hp_root[$hp_extras]"
    echo "venv: installing hyperplace${hp_extras:+[$hp_extras]} into $hp_venv" >&2
    "$hp_venv/bin/python" -m pip install --disable-pip-version-check -q --upgrade pip >/dev/null 2>&1 || true
    "$hp_venv/bin/python" -m pip install --disable-pip-version-check -q -e "$spec" || return 1
    echo "$want" >"$stamp"
    echo "$want" >>"$hp_venv/.hyperplace-installed-all"
  fi
  # shellcheck disable=SC1091
  . "$hp_venv/bin/activate"
}
