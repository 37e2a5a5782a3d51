#!/bin/bash
# One mode in the test machine (guest_boot.sh): what the harness sees (user, cgroup, session variables),
# `cachecraft doctor`, the sandbox's suites ($SUITES), one `cachecraft arena dev` at the smoke profile, and
# one SUMMARY line. Runs from the writable copy of the checkout.
set -u
name=$1
export PYTHONDONTWRITEBYTECODE=1
echo "== mode $name: $(id -un) (uid $(id -u)), cgroup $(cut -d: -f3 /proc/self/cgroup)," \
     "XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR-unset} DBUS_SESSION_BUS_ADDRESS=${DBUS_SESSION_BUS_ADDRESS-unset}"
.venv/bin/cachecraft doctor
found=$(.venv/bin/cachecraft doctor --json | .venv/bin/python -c 'import json,sys; d=json.load(sys.stdin); print(d["level"], "(" + d["boundary"] + ")")')
t0=$(date +%s)
# shellcheck disable=SC2086
.venv/bin/python -m pytest -q -p no:cacheprovider --basetemp="/tmp/pytest-$name" $SUITES 2>&1 | tee "/tmp/pytest-$name.log"
tests=$(grep -E '^(=+ )?[0-9]+ (passed|failed)|^[0-9]+ (passed|failed|error)|(passed|failed|error).* in [0-9.]+s' "/tmp/pytest-$name.log" | tail -1 | tr -d '=' | xargs)
t1=$(date +%s)
root=$(mktemp -d)
.venv/bin/cachecraft arena dev cachecraft_lib/arena/examples/frc --board A --profile smoke --root "$root" \
  >"/tmp/arena-$name.log" 2>&1
arena_rc=$?
tail -8 "/tmp/arena-$name.log"
t2=$(date +%s)
echo "SUMMARY $name: doctor: $found; tests: ${tests:-none ran} ($((t1 - t0)) s); arena dev frc A smoke: exit $arena_rc ($((t2 - t1)) s)"
