#!/usr/bin/env bash
# The sandbox's hostile suites twice more, after `make test`: once with the cgroup turned off (the "whole, no
# cgroup" boundary an organiser without one gets), and once as an unprivileged user this script creates (the
# boundary most organisers run: bubblewrap without root, no writable cgroup), so that the boundary is tested on
# the machines organisers have, not only as root on cgroup v1 (docs/sandbox.md). CI runs it after `make test`
# (.ci/run); run it yourself the same way. About 1-2 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
SUITES=(tests/test_sandbox_hostile.py tests/test_sandbox_boundary.py tests/test_sandbox_classes.py tests/test_sandbox_files.py)
# the per-evaluation wall budget is the arena's bookkeeping (press.py), the same in every mode, and slow to import
PYTEST=(.venv/bin/python -m pytest -q -x -p no:cacheprovider "${SUITES[@]}" -k "not per_evaluation_not_per_context")
start=$(date +%s)
echo "== the sandbox's hostile suites without a cgroup (CACHECRAFT_SANDBOX_NO_CGROUP=1)"
CACHECRAFT_SANDBOX_NO_CGROUP=1 "${PYTEST[@]}"

if [ "$(id -u)" != 0 ]; then
  echo "== not root: make test above already ran the suites as an unprivileged user"
  echo "sandbox CI runs: $(( $(date +%s) - start )) s"
  exit 0
fi
CI_USER=cachecraft-ci
id -u "$CI_USER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$CI_USER"
# The user must reach the interpreter, the virtual environment and the checkout: grant traversal (o+x, not
# listing) on the folders above them that lack it, for this run only.
opened=()
restore() { for dir in "${opened[@]}"; do chmod o-x "$dir"; done; }
trap restore EXIT
for path in "$(readlink -f .venv/bin/python)" "$PWD/.venv" "$PWD/tests"; do
  dir=$(dirname "$path")
  while [ "$dir" != / ]; do
    if [ -d "$dir" ] && [ $(( 0$(stat -c %a "$dir") & 1 )) = 0 ]; then chmod o+x "$dir"; opened+=("$dir"); fi
    dir=$(dirname "$dir")
  done
done
home=$(mktemp -d)
chown "$CI_USER" "$home"
echo "== the sandbox's hostile suites as the unprivileged user $CI_USER"
runuser -u "$CI_USER" -- env HOME="$home" PYTHONDONTWRITEBYTECODE=1 "${PYTEST[@]}" --basetemp="$home/pytest"
rm -rf "$home"
echo "sandbox CI runs: $(( $(date +%s) - start )) s"
