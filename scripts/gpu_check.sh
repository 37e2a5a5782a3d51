#!/usr/bin/env bash
# The GPU check: one command, within BUDGET_S (default 540: 9 minutes) seconds on one H200, no network
# (docs/gpu_check.md).
#   scripts/gpu_check.sh OUT            STEPS="..." to run chosen steps (env always runs); DRY_RUN=1 lists them
# 1. installs the carried wheels (GPU_WHEELS, default gpu_wheels/, made by scripts/gpu_wheels.sh) offline into
#    GPU_CHECK_SITE (default /tmp/gpu_check_site), first on PYTHONPATH, the repository after it;
# 2. env: prints the versions that matter; stops here if an import fails;
# 3. throughput (the grid's decode against KVPress's pipeline, gpu profile), rehearsal (the paper profile's grid
#    and latency on 8B-shaped random models: paper_cost.json), notebooks (all nine at the gpu profile:
#    notebooks.tar.gz): each under `timeout -k` (its workers are killed with it), cut to what is left of the
#    budget, skipped (and said so) with under MIN_STEP_S left. The first check's steps (embedded, eightb, search,
#    train: docs/gpu_runs/2026-12-04) run when STEPS names them;
# 4. summary: at most 8 files into OUT (summary.json, paper_cost.json, notebooks.tar.gz, CSVs, logs.tar.gz) and
#    a printed summary under 2 kB.
# Without CUDA every step runs at a CPU scale (tests/test_gpu_run.py, tests/test_gpu_sim.py).
set -u
OUT=${1:?usage: scripts/gpu_check.sh OUT}
REPO=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
WHEELS=${GPU_WHEELS:-$REPO/gpu_wheels}
export GPU_CHECK_SITE=${GPU_CHECK_SITE:-/tmp/gpu_check_site}
BUDGET=${BUDGET_S:-540}
DEFAULT_STEPS="throughput rehearsal notebooks"   # the first check's steps only when STEPS names them
MIN_STEP=${MIN_STEP_S:-20}
KILL_AFTER=${KILL_AFTER_S:-10}
TIME_SCALE=${GPU_CHECK_TIME_SCALE:-1}   # multiplies every step's timeout (a slow CPU stand-in); 1 on the GPU
START=$(date +%s)
DRY_USED=0
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")   # records and logs; OUT gets only the summary's files
echo "$START" > "$WORK/started"
: > "$WORK/steps.txt"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
# the rehearsal's tokenizer: SmolLM2's, carried beside the wheels (cp data/models/smollm2-135m-instruct/tokenizer*
# gpu_wheels/smollm2-tokenizer/), else the embedded model's (committed)
if [ -z "${GPU_CHECK_TOKENIZER:-}" ] && [ -f "$WHEELS/smollm2-tokenizer/tokenizer.json" ]; then
  export GPU_CHECK_TOKENIZER="$WHEELS/smollm2-tokenizer"
fi

step() {  # step NAME SECONDS: scripts/gpu_check.py NAME under timeout -k, its output in WORK/NAME.log
  local name=$1 limit=$(( $2 * TIME_SCALE ))
  if [ "$name" != env ] && [[ " ${STEPS:-$DEFAULT_STEPS} " != *" $name "* ]]; then
    echo "$name not asked for (STEPS=${STEPS:-$DEFAULT_STEPS})" | tee -a "$WORK/steps.txt"
    return 0
  fi
  local left=$(( BUDGET - ($(date +%s) - START) - DRY_USED ))
  [ "$limit" -gt "$left" ] && limit=$left
  if [ "${DRY_RUN:-0}" = 1 ]; then
    echo "$name dry-run (timeout ${limit}s): $PY scripts/gpu_check.py $name --work WORK" | tee -a "$WORK/steps.txt"
    DRY_USED=$(( DRY_USED + limit ))   # as if each step ran to its timeout
    return 0
  fi
  if [ "$limit" -lt "$MIN_STEP" ]; then
    echo "$name skipped (${left}s left of the ${BUDGET}s budget)" | tee -a "$WORK/steps.txt"
    return 0
  fi
  echo "== $name (timeout ${limit}s)"
  GPU_CHECK_STEP_LIMIT=$limit timeout -k "$KILL_AFTER" "$limit" "$PY" "$REPO/scripts/gpu_check.py" "$name" --work "$WORK" \
    > "$WORK/$name.log" 2>&1
  local rc=$?
  tail -n 1 "$WORK/$name.log"
  echo "$name rc=$rc" >> "$WORK/steps.txt"
}

summary() {
  timeout -k 5 60 "$PY" "$REPO/scripts/gpu_check.py" summary --work "$WORK" --out "$OUT"
}

if [ "${DRY_RUN:-0}" != 1 ]; then
  shopt -s nullglob
  wheels=("$WHEELS"/*.whl)
  if [ ${#wheels[@]} -eq 0 ]; then  # a machine of one's own with `make install` done needs none
    echo "no wheels in $WHEELS: using $PY's own packages (on the lent GPU machine, run scripts/gpu_wheels.sh" \
         "here first and carry the folder)"
    unset GPU_CHECK_SITE
  else
  echo "== install ${#wheels[@]} wheels into $GPU_CHECK_SITE (offline)"
  if ! "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --disable-pip-version-check \
       --target "$GPU_CHECK_SITE" "${wheels[@]}" > "$WORK/install.log" 2>&1; then
    cat "$WORK/install.log" >&2
    echo "install rc=1" >> "$WORK/steps.txt"
    summary
    exit 1
  fi
  fi
fi
export PYTHONPATH="${GPU_CHECK_SITE:+$GPU_CHECK_SITE:}$REPO${PYTHONPATH:+:$PYTHONPATH}"
cd "$REPO"
step env 30
if [ "${DRY_RUN:-0}" != 1 ] && ! grep -q '"verdict": "pass"' "$WORK/env.json" 2>/dev/null; then
  cat "$WORK/env.log"
  echo "an import failed or a carried package is not the one imported: stopping (fix scripts/gpu_wheels.txt)" >&2
  summary
  exit 1
fi
step throughput 60
step rehearsal 120
step notebooks 420   # what is left: about 6 minutes
step embedded 180
step eightb 150
step search 100
step train 45
[ "${DRY_RUN:-0}" = 1 ] && exit 0
summary
