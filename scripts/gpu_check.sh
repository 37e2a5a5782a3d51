#!/usr/bin/env bash
# The GPU check: one command, at most BUDGET_S (default 570) seconds on one H200, each step under its own timeout.
#   scripts/gpu_check.sh [OUT]          (default OUT: gpu_check_out)
#   DRY_RUN=1 scripts/gpu_check.sh OUT  prints the steps without running them (works on a CPU)
# Every step writes its log (and JSON where it measures) into OUT; OUT/steps.txt has each step's exit code.
# A step never runs past what is left of the budget: it gets min(its timeout, time left), and is skipped
# (written to steps.txt) when under MIN_STEP_S (15) seconds are left, so the whole check ends within BUDGET_S.
set -u
OUT=${1:-gpu_check_out}
PY=${PYTHON:-python}
BUDGET=${BUDGET_S:-570}
MIN_STEP=${MIN_STEP_S:-15}
START=$(date +%s)
mkdir -p "$OUT"
: > "$OUT/steps.txt"

step() {  # step NAME SECONDS COMMAND...
  local name=$1 limit=$2; shift 2
  local left=$(( BUDGET - ($(date +%s) - START) ))
  [ "$limit" -gt "$left" ] && limit=$left
  if [ "${DRY_RUN:-0}" = 1 ]; then
    echo "[dry-run] $name (timeout ${limit}s): $*" | tee -a "$OUT/steps.txt"
    return 0
  fi
  if [ "$limit" -lt "$MIN_STEP" ]; then
    echo "$name skipped (${left}s left of ${BUDGET}s)" | tee -a "$OUT/steps.txt"
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
step prefill 90 "$PY" scripts/gpu_check.py prefill --out "$OUT" --model 8b-shaped --length 8192
# 3. SmolLM2-135M-Instruct (converted once; a no-op when it is, fails fast without network) ...
step fetch_instruct 40 env PIP_RETRIES=0 PIP_DEFAULT_TIMEOUT=5 "$PY" -m cachecraft_lib.cli fetch-instruct
# 4. ... a small grid on it in float32 and bfloat16 (answers compared), stock vs token-by-token question feed
step instruct 90 "$PY" scripts/gpu_check.py instruct --out "$OUT" --model smollm2 --length 1024 --samples 2
# 5. one paper-model cell group (only if Llama-3.1-8B-Instruct or Qwen3-8B weights are cached; else skipped)
step paper 130 "$PY" scripts/gpu_check.py paper --out "$OUT" --length 4096
# 6. a 2-iteration search on CUDA: workers spawned (search.json: worker_failures 0), driver's peak memory
step search 150 "$PY" scripts/gpu_check.py search --out "$OUT" --iterations 2 --device cuda
# 7. the latency reference, few repeats
step latency 90 "$PY" scripts/gpu_latency.py --repeats 3 --lengths 4096 8192 --out "$OUT/latency.csv"
# 8. a short train-tiny on CUDA (look for a finite loss in the log)
step train_tiny 60 "$PY" -m cachecraft_lib.cli train-tiny --out "$OUT/tiny" --fresh --steps 30 --save-every 15 \
  --device cuda --workers 4
echo "results in $OUT (steps.txt, *.json, *.log)"
