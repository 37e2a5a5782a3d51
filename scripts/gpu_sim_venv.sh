#!/usr/bin/env bash
# A CPU stand-in for the GPU machine's Python (tests/test_gpu_sim.py): a clean CPython virtual environment
# (no system site-packages) holding only packages the machine's image has (the device docs' list), at the
# machine's versions where they install here, torch as the CPU build. The GPU check then installs its carried
# wheels into it offline, exactly as on the machine, so a wheel missing from scripts/gpu_wheels.txt fails here.
#   scripts/gpu_sim_venv.sh [VENV]          (default build/gpu-sim; reused when complete)
# SIM_PYTHON: the interpreter to build it from (default: a CPython 3.12, the machine's; on PyPI torch for 3.12 is
# the CUDA build, gigabytes, so CI uses its own Python and wheels downloaded for it: GPU_WHEELS_PYVER).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-build/gpu-sim}
STAMP="$VENV/.gpu-sim-complete"
# what the machine holds that this project or the carried wheels import (its image has many more; not pytz, whose
# absence stopped the first real run: pandas 2, carried, imports it)
MACHINE=(torch==2.13.0 transformers==5.17.0 tokenizers==0.23.2 huggingface_hub==1.33.0 accelerate==1.15.0
         safetensors==0.8.0 numpy peft pyyaml tqdm requests regex filelock fsspec packaging psutil pyarrow
         xxhash cloudpickle jinja2 markupsafe click werkzeug six python-dateutil matplotlib seaborn
         httpx httpcore hf-xet typer certifi urllib3 charset-normalizer sympy "pandas>=3" pytest)
if [ -f "$STAMP" ] && [ "$STAMP" -nt "$0" ]; then echo "$VENV is ready"; exit 0; fi
PY=
for cand in ${SIM_PYTHON:-} python3.12 /usr/bin/python3.12 /usr/local/bin/python3.12 \
            "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12; do
  if "$cand" -c 'import sys; assert sys.version_info >= (3, 10)' 2>/dev/null; then PY=$cand; break; fi
done
if [ -z "$PY" ]; then
  echo "no Python to build the stand-in from: set SIM_PYTHON (the GPU machine's python3 is 3.12)" >&2
  exit 2
fi
rm -rf "$VENV"
"$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${MACHINE[@]}"
touch "$STAMP"
echo "$VENV is ready: $("$VENV/bin/python" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)')"
