#!/usr/bin/env bash
# Boot the cgroup v2 test machine (build_image.sh's image) in qemu and run the sandbox's checks inside it, in
# each mode an organiser has on a current systemd distribution (scripts/vm/guest_boot.sh): an unprivileged
# user with a systemd user session, and root in a delegated cgroup: one boot per mode, each with its own time
# limit ($CACHECRAFT_VM_TIMEOUT_S, default 3600 s: root-delegated's suites ran past a shared 1,200 s under TCG).
# Prints one SUMMARY line per mode at the end: the guest's, or, for a mode stopped at its limit, how many tests it
# reached, passed and failed, and the last one.
#   scripts/vm/run.sh [--accel auto|kvm|tcg] [--suites "tests/a.py ..."] [--arena-modes "MODE ..."] [--worktree]
#                     [--modes "organiser-user-session root-delegated"] [--command "SHELL COMMAND"] [--record]
# --command runs that command as root in the guest's copy of the checkout instead of the modes (to look into one).
# The guest runs the committed HEAD (`git archive`; --worktree: the working tree as it is), with the checkout's
# .venv, its models and the .venv's interpreter shared read-only (9p); it works on a copy of the code in
# memory, and its disk is a throw-away snapshot: nothing on the host changes but $OUT.
# --record writes the run's output to docs/vm_runs/latest.md (date, commit, accelerator, the guest's log).
# KVM is tried first where /dev/kvm opens; a guest that shows no sign of life within $CACHECRAFT_VM_KVM_BOOT_S
# (default 20) is stopped and the run goes on under TCG (emulation: slower; see docs/cgroup2_vm.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
CHECKOUT=$PWD
DIR=${CACHECRAFT_VM_DIR:-/var/tmp/cachecraft-vm}
LOCK=${CACHECRAFT_CPU_LOCK:-/tmp/cachecraft-cpu.lock}
KVM_BOOT_S=${CACHECRAFT_VM_KVM_BOOT_S:-20}
TIMEOUT_S=${CACHECRAFT_VM_TIMEOUT_S:-3600}  # per boot, so per mode
ACCEL=auto RECORD=0 WORKTREE=0 COMMAND= MODES="organiser-user-session root-delegated"
ARENA_MODES=organiser-user-session  # the modes that also run `arena dev` (--arena-modes; TCG: minutes each)
SUITES="tests/test_sandbox_hostile.py tests/test_sandbox_boundary.py tests/test_sandbox_redteam.py
tests/test_sandbox_cgroup2.py tests/test_sandbox_doctor.py tests/test_sandbox_bwrap.py tests/test_sandbox_protocol.py
tests/test_sandbox_search.py tests/test_cgroup2_scope.py tests/test_sandbox_classes.py tests/test_sandbox_files.py"
while [ $# -gt 0 ]; do
  case $1 in
    --accel) ACCEL=$2; shift 2 ;;
    --suites) SUITES=$2; shift 2 ;;
    --record) RECORD=1; shift ;;
    --worktree) WORKTREE=1; shift ;;
    --arena-modes) ARENA_MODES=$2; shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    --command) COMMAND=$2; shift 2 ;;
    *) echo "usage: $0 [--accel auto|kvm|tcg] [--suites 'FILES'] [--record]" >&2; exit 2 ;;
  esac
done
for f in rootfs.img vmlinuz initrd.img; do
  [ -e "$DIR/$f" ] || { echo "run.sh: $DIR/$f missing: run scripts/vm/build_image.sh first" >&2; exit 2; }
done
command -v qemu-system-x86_64 >/dev/null || { echo "run.sh: apt-get install -y qemu-system-x86" >&2; exit 2; }
PYTHON=$(readlink -f .venv/bin/python)
PYTHON_PREFIX=$(.venv/bin/python -c 'import sys; print(sys.base_prefix)')
RUN=$DIR/out-$(date -u +%Y%m%dT%H%M%SZ)  # one folder per run; each boot's out share is RUN/MODE
mkdir -p "$RUN"
if [ "$WORKTREE" = 1 ]; then
  SRC=$CHECKOUT REV="$(git rev-parse --short HEAD) + the working tree"
else
  SRC=$RUN/src REV=$(git rev-parse --short HEAD)
  mkdir -p "$SRC" && git archive --format=tar HEAD | tar -x -C "$SRC"
fi
MODELS=$CHECKOUT/data/models
[ -d "$MODELS" ] || MODELS=$RUN  # nothing to share: an empty stand-in
echo "$REV" >"$RUN/rev"
[ -n "$COMMAND" ] && MODES=command  # --command: one boot, no modes
write_config() {  # write_config OUT MODE PLAIN_DOCTOR: what guest_boot.sh reads in that boot
  cat >"$1/config.env" <<EOF
CHECKOUT=$CHECKOUT
PYTHON_PREFIX=$PYTHON_PREFIX
SUITES="$(echo $SUITES)"
ARENA_MODES="$ARENA_MODES"
MODES="$([ "$2" = command ] || echo "$2")"
PLAIN_DOCTOR=$3
PYTHON_PREFIX_RO=${PYTHON_PREFIX_RO:-0}
COMMAND=$(printf %q "$COMMAND")
ARENA_TIMEOUT_S=${CACHECRAFT_VM_ARENA_TIMEOUT_S:-900}
EOF
}
echo "== run: $RUN (python $PYTHON, code: $REV; modes: $MODES; ${TIMEOUT_S} s per boot)"

boot() {  # boot($accel, $limit_s), in a subshell it replaces: the guest's console goes to $OUT/console-$accel.log
  local accel=$1 limit=$2 cpu
  if [ "$accel" = kvm ]; then cpu=host; else cpu=max; fi
  # --foreground: qemu stays in this process group, so stopping the run (or its group) stops the guest
  exec timeout --foreground --kill-after=10 "$limit" qemu-system-x86_64 -accel "$accel" -cpu "$cpu" -m 3072 -smp 2 \
    -display none -monitor none -serial "file:$OUT/console-$accel.log" -no-reboot -nic none \
    -kernel "$DIR/vmlinuz" -initrd "$DIR/initrd.img" \
    -append "root=/dev/vda rw console=ttyS0 panic=-1 quiet systemd.show_status=1" \
    -drive "file=$DIR/rootfs.img,format=raw,if=virtio,snapshot=on" \
    -virtfs "local,path=$SRC,mount_tag=checkout,security_model=none,readonly=on" \
    -virtfs "local,path=$CHECKOUT/.venv,mount_tag=venv,security_model=none,readonly=on" \
    -virtfs "local,path=$MODELS,mount_tag=models,security_model=none,readonly=on" \
    -virtfs "local,path=$PYTHON_PREFIX,mount_tag=python,security_model=none,readonly=on" \
    -virtfs "local,path=$OUT,mount_tag=out,security_model=none"
}

kvm_alive() {  # boot under KVM; stop it when the console shows no kernel line within KVM_BOOT_S
  (boot kvm "$TIMEOUT_S") & local pid=$! waited=0
  while [ $waited -lt "$KVM_BOOT_S" ] && kill -0 $pid 2>/dev/null; do
    if [ -s "$OUT/console-kvm.log" ]; then  # a kernel that prints anything on its serial console is running
      wait $pid; return 0
    fi
    sleep 2; waited=$((waited + 2))
  done
  if kill -0 $pid 2>/dev/null; then
    kill $pid; wait $pid 2>/dev/null || true
    echo "== KVM: no console output in ${KVM_BOOT_S} s ($(wc -c <"$OUT/console-kvm.log" 2>/dev/null || echo 0) bytes): falling back to TCG"
    return 1
  fi
  wait $pid
}

run_vm() {
  local start=$(date +%s) used=tcg
  if [ "$ACCEL" != tcg ] && [ -r /dev/kvm ] && [ -w /dev/kvm ] && kvm_alive; then
    used=kvm
  elif [ "$ACCEL" = kvm ]; then
    echo "run.sh: KVM did not work here (--accel kvm)" >&2; return 1
  else
    (boot tcg "$TIMEOUT_S") || echo "== qemu (tcg) ended with $?"
  fi
  echo "$used" >"$OUT/accel"
  echo "== the guest ran under $used in $(( $(date +%s) - start )) s"
}

summarise() {  # summarise OUT MODE: the mode's SUMMARY lines into OUT/summary; status 1 unless all passed
  local out=$1 mode=$2 passed failed last
  if [ ! -e "$out/guest.log" ]; then
    echo "SUMMARY $mode: the guest wrote no log (its console: $out/console-*.log)" >"$out/summary"
    tail -30 "$out"/console-*.log >&2 || true
    return 1
  fi
  grep '^SUMMARY' "$out/guest.log" >"$out/summary" || true
  if [ "$mode" != command ] && ! grep -q "^SUMMARY $mode: boundary" "$out/summary"; then
    # stopped at the limit (or the guest died): what pytest -v printed says how far it got
    local test='^tests/[^ ]+::.* '  # pytest -v's line per test (a parameter may hold spaces)
    passed=$(grep -cE "$test(PASSED|XFAIL)" "$out/guest.log" || true)
    failed=$(grep -cE "$test(FAILED|ERROR)" "$out/guest.log" || true)
    last=$(grep -E "$test(PASSED|FAILED|ERROR|SKIPPED)" "$out/guest.log" | tail -1 | sed -E 's/ (PASSED|FAILED|ERROR|SKIPPED).*//')
    echo "SUMMARY $mode: did not finish within ${TIMEOUT_S} s: $((passed + failed)) tests reached, $passed passed," \
         "$failed failed (last: ${last:-none})" | tee -a "$out/guest.log" >>"$out/summary"
  fi
  [ "$mode" = command ] && return "$(cat "$out/guest.rc" 2>/dev/null || echo 1)"
  ! grep -qE 'did not finish|no log| [1-9][0-9]* failed| [1-9][0-9]* errors?|exit [1-9]' "$out/summary"
}

# a VM is a heavy job: one at a time on this machine (the shared CPU lock); one boot per mode, so that each mode's
# suites get the whole limit
export -f boot kvm_alive run_vm
export DIR CHECKOUT SRC MODELS PYTHON_PREFIX KVM_BOOT_S TIMEOUT_S ACCEL
status=0 last_mode=${MODES##* }
for mode in $MODES; do
  out=$RUN/$mode
  mkdir -p "$out"
  write_config "$out" "$mode" "$([ "$mode" = "$last_mode" ] && echo 1 || echo 0)"  # plain root's doctor: once
  echo "== mode $mode: out share $out"
  OUT=$out flock "$LOCK" bash -c run_vm
  summarise "$out" "$mode" || status=1
done
accel=$(cat "$RUN"/*/accel 2>/dev/null | sort -u | xargs)
echo "== summary ($REV; accelerator: ${accel:-none}; ${TIMEOUT_S} s per mode):"
cat "$RUN"/*/summary
if [ "$RECORD" = 1 ]; then
  mkdir -p docs/vm_runs
  {
    echo "# The cgroup v2 test machine's latest run"
    echo
    echo "Run $(date -u +%Y-%m-%d) on commit $(cat "$RUN/rev")" \
         "by \`scripts/vm/run.sh\` ([docs/cgroup2_vm.md](../cgroup2_vm.md)); accelerator: ${accel:-none};" \
         "host: $(uname -r), $(nproc) CPUs; one boot per mode, ${TIMEOUT_S} s each."
    echo
    echo '```'
    cat "$RUN"/*/summary
    echo '```'
    for mode in $MODES; do
      echo
      echo "The guest's log, mode $mode:"
      echo
      echo '```'
      cat "$RUN/$mode/guest.log" 2>/dev/null || echo "(none)"
      echo '```'
    done
  } | sed "s#$CHECKOUT#<checkout>#g" >docs/vm_runs/latest.md  # the record names no path of this machine
  echo "== recorded in docs/vm_runs/latest.md"
fi
exit $status
