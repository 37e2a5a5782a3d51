#!/bin/bash
# Runs as root in the test machine at boot (guest_service.sh, from the read-only checkout share): makes a
# writable copy of the checkout with the shared .venv in place, then runs guest_mode.sh in each mode an
# organiser has on a cgroup v2 systemd machine, and once more `cachecraft doctor` as plain root (no delegation)
# to show what it tells an organiser there. Each mode prints one SUMMARY line.
set -u
. /mnt/out/config.env
started=$(date +%s)
echo "== guest up: kernel $(uname -r), $(systemctl --version | head -1), /sys/fs/cgroup is $(stat -fc %T /sys/fs/cgroup)," \
     "root controllers: $(cat /sys/fs/cgroup/cgroup.controllers), $(nproc) CPUs, $(awk '/MemTotal/ {print $2 / 1024 " MB"}' /proc/meminfo)," \
     "system up $(cut -d' ' -f1 /proc/uptime) s"
# the code, writable (tmpfs), with the shared (read-only) .venv and models at their places; owned by the
# organiser
mkdir -p "$CHECKOUT"
mount -t tmpfs -o size=512m,mode=0755 cachecraft-checkout "$CHECKOUT"
tar -C /mnt/checkout --exclude=./.venv --exclude=./.git --exclude=./data/results --exclude=./data/models \
    --exclude=./runs --exclude=./gpu_wheels --exclude=./.pytest_cache -cf - . | tar -C "$CHECKOUT" -xf -
mkdir -p "$CHECKOUT/.venv" "$CHECKOUT/data/models"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288,ro,cache=loose venv "$CHECKOUT/.venv"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288,ro,cache=loose models "$CHECKOUT/data/models"
chown -R organiser: "$CHECKOUT" 2>/dev/null
# The interpreter's prefix, writable in the guest only (an overlay on the read-only share; the host's is
# writable too): a root harness's stage (sandbox/bwrap.py, _stage_and_drop) opens each file it binds over with
# O_CREAT|O_WRONLY, which fails with EROFS on a read-only prefix (measured here at 6616c6a: "Read-only file
# system: .../_sysconfigdata__linux_x86_64-linux-gnu.py"). PYTHON_PREFIX_RO=1 keeps it read-only.
if [ "${PYTHON_PREFIX_RO:-0}" != 1 ]; then
  mkdir -p /mnt/python /run/python-overlay/upper /run/python-overlay/work
  umount "$PYTHON_PREFIX"
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288,ro,cache=loose python /mnt/python
  if mount -t overlay -o lowerdir=/mnt/python,upperdir=/run/python-overlay/upper,workdir=/run/python-overlay/work \
       cachecraft-python "$PYTHON_PREFIX"; then
    echo "== the interpreter's prefix: an overlay, writable in the guest"
  else
    mount --bind /mnt/python "$PYTHON_PREFIX"; echo "== the interpreter's prefix: read-only (no overlay)"
  fi
fi
echo "== checkout copied in $(( $(date +%s) - started )) s; python: $("$CHECKOUT/.venv/bin/python" -V 2>&1)"

# the organiser's user manager (lingering: started at boot); wait until its bus answers
for _ in $(seq 120); do
  [ -S /run/user/1000/bus ] && systemctl is-active -q user@1000.service && break
  sleep 1
done
echo "== user@1000.service: $(systemctl is-active user@1000.service); linger: $(loginctl show-user organiser -p Linger 2>&1)"

if [ -n "${COMMAND:-}" ]; then  # run.sh --command: that alone
  (cd "$CHECKOUT" && bash -c "$COMMAND"); rc=$?
  echo "== guest done in $(( $(date +%s) - started )) s (--command exited $rc)"
  exit 0
fi
mode_script=$CHECKOUT/scripts/vm/guest_mode.sh
# the organiser writes its arena log to the out share (root's there); created here, owned by it
for m in organiser-user-session root-delegated; do
  : >"/mnt/out/arena-$m.log"; chown organiser: "/mnt/out/arena-$m.log" 2>/dev/null || chmod 666 "/mnt/out/arena-$m.log"
done
run_as_organiser() {  # a PAM login session (runuser -l), as ssh gives
  runuser -l organiser -c "cd '$CHECKOUT' && SUITES='$SUITES' ARENA_TIMEOUT_S='$ARENA_TIMEOUT_S' bash '$mode_script' $*"
}
run_as_root_delegated() {  # a transient scope with Delegate=yes, as a unit with Delegate=yes gives
  systemd-run --scope --quiet --unit="cachecraft-root-delegated-$RANDOM" -p Delegate=yes -- \
    env -C "$CHECKOUT" SUITES="$SUITES" ARENA_TIMEOUT_S="$ARENA_TIMEOUT_S" HOME=/root bash "$mode_script" "$@"
}
# (a) an unprivileged organiser with a systemd user session; (b) root in a delegated cgroup
for m in ${MODES:-organiser-user-session root-delegated}; do
  case $m in
    organiser-user-session) run_as_organiser organiser-user-session ;;
    root-delegated) run_as_root_delegated root-delegated ;;
  esac
done
# (c) root in a cgroup it was not given (this service's): what doctor says there (run.sh asks in one boot only)
if [ "${PLAIN_DOCTOR:-1}" = 1 ]; then
  echo "== plain root, no delegation: cachecraft doctor"
  (cd "$CHECKOUT" && .venv/bin/cachecraft doctor; echo "SUMMARY root-not-delegated: boundary $(.venv/bin/cachecraft doctor --json | .venv/bin/python -c 'import json,sys; d=json.load(sys.stdin); print(d["level"], "(" + d["boundary"] + ")")') (doctor only)")
fi
# then `arena dev` in this boot's modes that run it (slow under emulation: last, so that the suites always ran)
for m in $ARENA_MODES; do
  case " ${MODES:-organiser-user-session root-delegated} " in *" $m "*) ;; *) continue ;; esac
  case $m in
    organiser-user-session) run_as_organiser organiser-user-session arena ;;
    root-delegated) run_as_root_delegated root-delegated arena ;;
  esac
done
echo "== guest done in $(( $(date +%s) - started )) s"
