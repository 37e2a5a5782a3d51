#!/bin/bash
# One mode in the test machine (guest_boot.sh), from the writable copy of the checkout:
#   guest_mode.sh NAME        what the harness sees (user, cgroup, session variables), `cachecraft doctor`, the
#                             sandbox's suites ($SUITES), and one SUMMARY line;
#   guest_mode.sh NAME arena  one `cachecraft arena dev` of the FRC example at the smoke profile (its log in the
#                             out share, stopped after $ARENA_TIMEOUT_S), and one SUMMARY line.
set -u
name=$1
export PYTHONDONTWRITEBYTECODE=1
# Under emulation (TCG: systemd-detect-virt says qemu, not kvm) the timing tests' 1-3 s budgets are scaled
# (tests/sandbox_helpers.py TIME_SCALE); on KVM or real hardware they run as on the host.
if [ "$(systemd-detect-virt 2>/dev/null)" = qemu ]; then export CACHECRAFT_TEST_TIME_SCALE=${CACHECRAFT_TEST_TIME_SCALE:-8}; fi
if [ "${2:-}" = arena ]; then
  t0=$(date +%s)
  root=$(mktemp -d)
  timeout "${ARENA_TIMEOUT_S:-900}" .venv/bin/cachecraft arena dev cachecraft_lib/arena/examples/frc --board A \
    --profile smoke --root "$root" >"/mnt/out/arena-$name.log" 2>&1
  rc=$?
  cp -r "$root/dev" "/mnt/out/arena-$name-dev" 2>/dev/null || true  # the baselines' dev rows, to replay the scoring on the host
  tail -8 "/mnt/out/arena-$name.log"
  echo "SUMMARY $name: arena dev frc A smoke: exit $rc$([ $rc = 124 ] && echo ": stopped after ${ARENA_TIMEOUT_S:-900} s")" \
       "($(( $(date +%s) - t0 )) s)"
  exit $rc
fi
echo "== mode $name: $(id -un) (uid $(id -u)), cgroup $(cut -d: -f3 /proc/self/cgroup)," \
     "XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR-unset} DBUS_SESSION_BUS_ADDRESS=${DBUS_SESSION_BUS_ADDRESS-unset}"
.venv/bin/cachecraft doctor
found=$(.venv/bin/cachecraft doctor --json | .venv/bin/python -c 'import json,sys; d=json.load(sys.stdin); print(d["level"], "(" + d["boundary"] + ")")')
t0=$(date +%s)
# shellcheck disable=SC2086
.venv/bin/python -m pytest -v -p no:cacheprovider -rfE --basetemp="/tmp/pytest-$name" $SUITES 2>&1 | tee "/tmp/pytest-$name.log"
status=${PIPESTATUS[0]}
tests=$(grep -E '(passed|failed|error).* in [0-9.]+s' "/tmp/pytest-$name.log" | tail -1 | tr -d '=' | xargs)
echo "SUMMARY $name: boundary $found; suites: $(echo $SUITES | wc -w) files, ${tests:-none ran}; exit $status" \
     "($(( $(date +%s) - t0 )) s, cgroup $(cut -d: -f3 /proc/self/cgroup))"
exit "$status"
