#!/usr/bin/env bash
# Downloads the wheels the GPU check needs beyond what the GPU machine has (scripts/gpu_wheels.txt), for CPython
# 3.12 on manylinux x86-64, into WHEELS (default gpu_wheels/, ignored by git), builds a wheel of any package that
# has only a source archive, and checks that they, with the working tree, stay well under the device tool's
# 64 MiB carry limit. Run it where PyPI is reachable (the GPU machine has no network):
#   scripts/gpu_wheels.sh [WHEELS]          PYTHON=python3.x to choose the pip that downloads
# GPU_WHEELS_PYVER=3.11 downloads the same list for another CPython (the CPU stand-in, tests/test_gpu_sim.py);
# GPU_WHEELS_SEED=DIR first copies the version-independent wheels (py3-none-any, abi3) from DIR.
# A second run keeps what is already there (pip skips files it has) and removes wheels no longer listed.
# It also unpacks Debian's bubblewrap (and the shared libraries it links) into WHEELS/bubblewrap, so that the GPU
# machine (no bwrap, no network, maybe not root) runs untrusted code behind the full sandbox: the sandbox finds
# WHEELS/bubblewrap/usr/bin/bwrap by itself when WHEELS is gpu_wheels/ (else set CACHECRAFT_BWRAP to it).
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=${1:-gpu_wheels}
PY=${PYTHON:-python3}
PYVER=${GPU_WHEELS_PYVER:-3.12}
ABI=cp${PYVER/./}
LIST=scripts/gpu_wheels.txt
LIMIT_MIB=${GPU_WHEELS_LIMIT_MIB:-62}   # the carry limit is 64 MiB for the tree and the wheels together (60 MiB now)
mkdir -p "$WHEELS"
if [ -n "${GPU_WHEELS_SEED:-}" ] && [ -d "$GPU_WHEELS_SEED" ]; then
  for whl in "$GPU_WHEELS_SEED"/*-py3-none-any.whl "$GPU_WHEELS_SEED"/*-py2.py3-none-any.whl \
             "$GPU_WHEELS_SEED"/*-abi3-*.whl; do
    [ -f "$whl" ] || continue
    # an abi3 wheel built for cp3N installs on Python 3.N and later only (pyzmq's cp312-abi3 is not a 3.11 wheel)
    if [[ "$(basename "$whl")" =~ -cp3([0-9]+)-abi3- ]] && [ "${BASH_REMATCH[1]}" -gt "${PYVER#3.}" ]; then continue; fi
    cp -n "$whl" "$WHEELS/"
  done
fi
mapfile -t SPECS < <(grep -Ev '^\s*(#|$)' "$LIST")
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)
PIP=("$PY" -m pip --disable-pip-version-check -q)
shopt -s nocaseglob nullglob
for spec in "${SPECS[@]}"; do
  have=("$WHEELS/${spec%%==*}-${spec##*==}-"*.whl "$WHEELS/$(echo "${spec%%==*}" | tr - _)-${spec##*==}-"*.whl)
  [ ${#have[@]} -gt 0 ] && continue  # already here: no registry call
  echo "downloading $spec"
  if ! "${PIP[@]}" download --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp --abi "$ABI" \
       --abi abi3 --abi none "${PLATFORMS[@]}" -d "$WHEELS" "$spec" 2>/dev/null; then
    # no wheel on PyPI (a pure-python source archive): build one here
    tmp=$(mktemp -d)
    "${PIP[@]}" download --no-deps --no-binary=:all: -d "$tmp" "$spec"
    "${PIP[@]}" wheel --no-deps -w "$WHEELS" "$tmp"/*
    rm -rf "$tmp"
  fi
done
# keep exactly the listed wheels (one version each: two of one package stop the offline install)
"$PY" - "$WHEELS" "${SPECS[@]}" <<'PYEOF'
import re, sys
from pathlib import Path
folder, specs = Path(sys.argv[1]), sys.argv[2:]
norm = lambda s: re.sub(r"[-_.]+", "_", s).lower()
wanted = {norm(s.split("==")[0]): s.split("==")[1] for s in specs}
found = {}
for whl in sorted(folder.glob("*.whl")):
    name, version = whl.name.split("-")[:2]
    if wanted.get(norm(name)) != version:
        print(f"removing {whl.name} (not in scripts/gpu_wheels.txt)")
        whl.unlink()
    else:
        found[norm(name)] = whl.name
missing = sorted(set(wanted) - set(found))
if missing:
    sys.exit(f"no wheel for {missing}: check scripts/gpu_wheels.txt")
PYEOF
# bubblewrap for the sandbox (cachecraft_lib/sandbox/bwrap.py looks for gpu_wheels/bubblewrap/usr/bin/bwrap)
BWRAP_DIR="$WHEELS/bubblewrap"
if [ ! -x "$BWRAP_DIR/usr/bin/bwrap" ]; then
  echo "unpacking bubblewrap (apt-get download + dpkg -x) into $BWRAP_DIR"
  debs=$(mktemp -d)
  (cd "$debs" && apt-get download -q bubblewrap libcap2 libselinux1 libpcre2-8-0 >/dev/null)
  mkdir -p "$BWRAP_DIR/libs"
  for deb in "$debs"/*.deb; do dpkg -x "$deb" "$BWRAP_DIR"; done
  # the libraries bwrap links, in one folder the sandbox puts on LD_LIBRARY_PATH for it (libs/)
  find "$BWRAP_DIR" -path "$BWRAP_DIR/libs" -prune -o -name '*.so*' -print -exec cp -a {} "$BWRAP_DIR/libs/" \; >/dev/null
  rm -rf "$debs" "$BWRAP_DIR/usr/share" "$BWRAP_DIR/usr/lib" "$BWRAP_DIR/lib"
fi
"$BWRAP_DIR/usr/bin/bwrap" --version >/dev/null 2>&1 || LD_LIBRARY_PATH="$BWRAP_DIR/libs" "$BWRAP_DIR/usr/bin/bwrap" --version
wheels_kib=$(du -sk --apparent-size "$WHEELS" | cut -f1)
tree_kib=$(git ls-files -z | du -ck --apparent-size --files0-from=- 2>/dev/null | tail -1 | cut -f1)
untracked_kib=$(git ls-files -z --others --exclude-standard | du -ck --apparent-size --files0-from=- 2>/dev/null | tail -1 | cut -f1)
total_mib=$(( (wheels_kib + tree_kib + ${untracked_kib:-0}) / 1024 ))
echo "gpu wheels: $(ls "$WHEELS"/*.whl | wc -l) wheels and bubblewrap, $(( wheels_kib / 1024 )) MiB in $WHEELS;" \
     "with the working tree ($(( (tree_kib + ${untracked_kib:-0}) / 1024 )) MiB) ${total_mib} MiB of the 64 MiB carry limit"
if [ "$total_mib" -gt "$LIMIT_MIB" ]; then
  echo "over ${LIMIT_MIB} MiB: too close to the 64 MiB carry limit; trim scripts/gpu_wheels.txt" >&2
  exit 1
fi
