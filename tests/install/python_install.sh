#!/usr/bin/env bash
# The Python package installed as docs/python.md tells a user to, on a machine with no package index:
#   python3 -m venv --system-site-packages .venv && .venv/bin/pip install ./python
# in fresh virtual environments in a scratch folder (no pip configuration, no network where `unshare -n`
# is allowed), then, from another folder and without LOSSJIT_LIBRARY, `import lossjit` finds the
# library inside the installed package and a NumPy call on the CPU reference matches NumPy. Also:
# `--no-index`, the build's message when there is no library, `pip install -e`, and that nothing was
# written under python/. Needs no GPU; needs Debian's python3-venv (venv, and pip for it through
# ensurepip) and python3-numpy, and git.
# Usage: tests/install/python_install.sh [LIBRARY]
#   LIBRARY: the built liblossjit_c.so.1 (default: $LOSSJIT_LIBRARY, else build/src/capi/liblossjit_c.so.1)
#   PYTHON (environment): the interpreter (default /usr/bin/python3, Debian's, whose numpy the venv sees)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
fail() { echo "python_install: FAILED: $*" >&2; exit 1; }

default_library="$root/build/src/capi/liblossjit_c.so.1"
library=${1:-${LOSSJIT_LIBRARY:-$default_library}}
[ -f "$library" ] || fail "no library at $library: build it first (cmake -S . -B build && cmake --build build)"
library="$(cd "$(dirname "$library")" && pwd)/$(basename "$library")"
python=${PYTHON:-/usr/bin/python3}
command -v "$python" >/dev/null || python=python3
"$python" -c 'import venv, ensurepip' 2>/dev/null || fail "$python has no venv/ensurepip: install Debian's python3-venv"
"$python" -c 'import numpy' 2>/dev/null || fail "$python has no numpy: install Debian's python3-numpy"

# As a fresh machine: no pip configuration or index, nothing of this shell's Python setup.
while read -r name; do unset "$name"; done < <(compgen -e | grep -E '^(PIP_|PYTHON)' || true)
unset LOSSJIT_LIBRARY VIRTUAL_ENV
export PIP_CONFIG_FILE=/dev/null PIP_NO_INPUT=1
# No network at all where a network namespace can be made (root, or unprivileged user namespaces).
offline=()
if unshare -n true 2>/dev/null; then offline=(unshare -n)
elif unshare -rn true 2>/dev/null; then offline=(unshare -rn)
else echo "python_install: unshare -n not allowed here; the network stays up (pip still gets no index)"
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
elsewhere="$scratch/elsewhere"
mkdir "$elsewhere"

# Everything under python/ (ignored files too: each file's size and time, each folder's name) and
# git's view of it, to compare after; but for __pycache__/ folders, which any Python that imports
# the build backend or the package may write (and git ignores). Folder times are left out.
snapshot() {
  find python -name __pycache__ -prune -o \( -type d -printf '%p/\n' \) -o -printf '%p %s %T@\n' | sort
  git status --porcelain --ignored --untracked-files=all python | grep -v '__pycache__/' || true
}
before=$(snapshot)

# Imports the installed package from another folder and checks it (prints one line).
check_import() {
  local venv=$1
  (cd "$elsewhere" && "$venv/bin/python" - "$venv" "$root" <<'EOF'
import importlib.metadata, pathlib, sys
import numpy as np
import lossjit
import lossjit._lib

venv = pathlib.Path(sys.argv[1]).resolve()
package = pathlib.Path(lossjit.__file__).resolve().parent
library = pathlib.Path(lossjit._lib.library_path).resolve()
assert venv in package.parents, f"lossjit imported from {package}, not from the venv {venv}"
assert library == package / "liblossjit_c.so.1", f"loaded {library}, not the package's copy"
# The native path's source and the C header it is built with (lossjit.build_native()).
assert (package / "_native.cpp").is_file(), f"no _native.cpp in {package}"
header = package / "include" / "lossjit" / "lossjit.h"
assert header.read_bytes() == (pathlib.Path(sys.argv[2]) / "include" / "lossjit" / "lossjit.h").read_bytes(), header
assert importlib.metadata.version("lossjit") == lossjit.__version__, \
    f"package {importlib.metadata.version('lossjit')} != library {lossjit.__version__} (python/pyproject.toml vs CMake)"
rng = np.random.default_rng(33)
p, t = rng.standard_normal((64, 10)).astype(np.float32), rng.standard_normal(10)
got = lossjit.compile("mean((p - t)^2)")(p, t)
want = float(np.mean((p.astype(np.float64) - t) ** 2))
assert isinstance(got, float) and abs(got - want) <= 1e-12 * abs(want), (got, want)
print(f"import ok from {pathlib.Path.cwd()}: lossjit {lossjit.__version__}, {library}; mean((p - t)^2) = {got!r}, numpy {want!r}")
EOF
  ) || fail "import lossjit from $venv"
}

# The installed library: the same bytes as the one built, and nothing of it names the build tree.
check_library() {
  local installed
  installed=$(find "$1" -path '*/site-packages/lossjit/liblossjit_c.so.1')
  [ -n "$installed" ] || fail "no lossjit/liblossjit_c.so.1 in $1"
  cmp -s "$installed" "$library" || fail "$installed differs from $library"
  local deps
  deps=$(ldd "$installed")
  ! grep -q "not found" <<<"$deps" || fail "ldd $installed: $deps"
  ! grep -qF "$root" <<<"$deps" || fail "the installed library loads something from the checkout: $deps"
  if command -v readelf >/dev/null && readelf -d "$installed" | grep -E 'R(UN)?PATH' | grep -qF "$root"; then
    fail "the installed library's RPATH names the checkout: $(readelf -d "$installed" | grep -E 'R(UN)?PATH')"
  fi
}

# The library for the build: the checkout's build folder is what `pip install ./python` takes by
# itself; another library goes through LOSSJIT_LIBRARY.
build_env=()
[ "$library" -ef "$default_library" ] || build_env=(LOSSJIT_LIBRARY="$library")

echo "== 1. the documented commands: python3 -m venv --system-site-packages .venv && .venv/bin/pip install ./python"
"$python" -m venv --system-site-packages "$scratch/.venv" || fail "venv (Debian's python3-venv)"
env "${build_env[@]}" "${offline[@]}" "$scratch/.venv/bin/pip" install ./python >"$scratch/pip1.log" 2>&1 \
  || { cat "$scratch/pip1.log"; fail "pip install ./python"; }
grep -q "Successfully installed lossjit-" "$scratch/pip1.log" || { cat "$scratch/pip1.log"; fail "pip install ./python"; }
check_library "$scratch/.venv"
check_import "$scratch/.venv"

echo "== 2. --no-index, the library through LOSSJIT_LIBRARY; again over the installed one"
"$python" -m venv --system-site-packages "$scratch/venv2"
for round in 1 2; do
  env LOSSJIT_LIBRARY="$library" "${offline[@]}" "$scratch/venv2/bin/pip" install --no-index ./python >"$scratch/pip2.log" 2>&1 \
    || { cat "$scratch/pip2.log"; fail "pip install --no-index ./python (round $round)"; }
done
grep -q "Successfully installed lossjit-" "$scratch/pip2.log" || { cat "$scratch/pip2.log"; fail "reinstall"; }
check_library "$scratch/venv2"
check_import "$scratch/venv2"

echo "== 3. no library: the build stops and says how to make one"
if env LOSSJIT_LIBRARY="$scratch/none/liblossjit_c.so.1" "${offline[@]}" "$scratch/venv2/bin/pip" install --no-index ./python \
     >"$scratch/pip3.log" 2>&1; then
  fail "pip install succeeded without a library"
fi
grep -qF "cmake -S . -B build && cmake --build build" "$scratch/pip3.log" || { cat "$scratch/pip3.log"; fail "no hint in the error"; }
echo "refused, with: $(grep -m1 'lossjit: no liblossjit_c.so.1' "$scratch/pip3.log" | sed 's/^ *//')"

echo "== 4. pip install -e ./python: the checkout's package and build folder"
if [ -f "$default_library" ]; then
  "$python" -m venv --system-site-packages "$scratch/venv3"
  "${offline[@]}" "$scratch/venv3/bin/pip" install --no-index -e ./python >"$scratch/pip4.log" 2>&1 \
    || { cat "$scratch/pip4.log"; fail "pip install -e ./python"; }
  # No bytecode: the package imported is the checkout's, whose folder must stay as it was.
  (cd "$elsewhere" && PYTHONDONTWRITEBYTECODE=1 "$scratch/venv3/bin/python" -c '
import sys, lossjit, lossjit._lib as l
assert l.__file__ == sys.argv[1] + "/python/lossjit/_lib.py", l.__file__
assert l.library_path == sys.argv[1] + "/build/src/capi/liblossjit_c.so.1", l.library_path
print("editable ok:", l.__file__, l.library_path)' "$root") || fail "editable import"
else
  echo "skipped: no $default_library for the editable install to find"
fi

echo "== 5. the checkout: nothing written under python/"
after=$(snapshot)
[ "$before" == "$after" ] || { diff <(echo "$before") <(echo "$after") >&2 || true; fail "python/ changed"; }
echo "python_install: all passed"
