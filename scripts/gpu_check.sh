#!/usr/bin/env bash
# The GPU check: one command, under 10 minutes on one H200, each step under its own timeout.
#   scripts/gpu_check.sh [OUT]          (default OUT: gpu_check_out)
#   DRY_RUN=1 scripts/gpu_check.sh OUT  prints the steps without running them (works on a CPU)
# Every step writes its log (and JSON where it measures) into OUT; OUT/steps.txt has each step's exit code.
set -u
OUT=${1:-gpu_check_out}
PY=${PYTHON:-python}
mkdir -p "$OUT"
: > "$OUT/steps.txt"

step() {  # step NAME SECONDS COMMAND...
  local name=$1 limit=$2; shift 2
  if [ "${DRY_RUN:-0}" = 1 ]; then
    echo "[dry-run] $name (timeout ${limit}s): $*" | tee -a "$OUT/steps.txt"
    return 0
  fi
  echo "== $name (timeout ${limit}s)"
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc" | tee -a "$OUT/steps.txt"
}

# 1. CUDA and precision settings (no hub)
step env 30 "$PY" scripts/gpu_check.py env --out "$OUT"
# 2. the 8B-shaped model's shared prefill memory and every press's per-layer cache lengths at 8192 tokens
step prefill 120 "$PY" scripts/gpu_check.py prefill --out "$OUT" --model 8b-shaped --length 8192
# 3. the latency reference, few repeats
step latency 150 "$PY" scripts/gpu_latency.py --repeats 5 --lengths 4096 8192 --out "$OUT/latency.csv"
# 4. a short train-tiny on CUDA (look for a finite loss in the log)
step train_tiny 90 "$PY" -m cachecraft_lib.cli train-tiny --out "$OUT/tiny" --fresh --steps 30 --save-every 15 \
  --device cuda --workers 4
# 5. a 2-iteration search on CUDA: workers spawned (search.json: worker_failures 0), driver's peak memory
step search 180 "$PY" scripts/gpu_check.py search --out "$OUT" --iterations 2 --device cuda
echo "results in $OUT (steps.txt, *.json, *.log)"
