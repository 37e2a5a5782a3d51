# CacheCraft Lab. `make` creates .venv and installs; `make reproduce` and `make test` do everything else (README).
# Each creates .venv if needed and installs into it. torch is pinned to the CPU build that installs in
# seconds here; a GPU user installs a CUDA build of torch into .venv first (README), which is kept.

PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_SPEC ?= torch==2.13.0
PROFILE ?= cpu
STAMP := $(VENV)/.cachecraft-installed
EXTRAS ?= instruct,ray,serve,pipeline
TEST_EXTRAS := $(VENV)/.cachecraft-test-extras
PIPELINE := $(VENV)/.cachecraft-pipeline
# DVC (the pipeline behind `make reproduce` and `make check-figures`) sends no usage reports from here
export DVC_NO_ANALYTICS := 1

.DEFAULT_GOAL := install
.PHONY: install test reproduce check-figures pipeline lab lint clean-notebooks train-tiny browser sandbox-tools

# The sandbox for untrusted code (arena submissions, search candidates) needs bubblewrap and libseccomp
# (cachecraft_lib/sandbox, docs/sandbox.md); as root they are installed here, otherwise the command says what to run.
SANDBOX_DEBS := bubblewrap libseccomp2

sandbox-tools:
	@missing=""; command -v bwrap >/dev/null || missing="bubblewrap"; \
	  ldconfig -p 2>/dev/null | grep -q libseccomp.so.2 || missing="$$missing libseccomp2"; \
	  if [ -n "$$missing" ]; then \
	    if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SANDBOX_DEBS) >/dev/null; \
	    else echo "the sandbox needs:$$missing; install with: sudo apt-get install -y $(SANDBOX_DEBS)"; fi; fi

$(STAMP): pyproject.toml
	@$(MAKE) --no-print-directory sandbox-tools
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install --quiet --disable-pip-version-check "$(TORCH_SPEC)"
	$(BIN)/pip install --quiet --disable-pip-version-check -e ".[dev]"
	$(BIN)/python -m ipykernel install --sys-prefix --name cachecraft --display-name "Python (cachecraft .venv)" >/dev/null
	@touch $(STAMP)

install: $(STAMP)

# The tests also cover the optional extras (the GGUF reader, Ray, the instruct model's OpenAI-compatible server);
# they are installed again whenever pyproject.toml changes. The instruct-model tests need SmolLM2-135M-Instruct
# converted (once; skipped when the folder is complete).
$(TEST_EXTRAS): pyproject.toml $(STAMP)
	$(BIN)/pip install --quiet --disable-pip-version-check -e ".[$(EXTRAS)]"
	@touch $(TEST_EXTRAS)

# The arena site's browser tests (tests/test_site.py) open pages in headless Chromium: installed from Debian when
# missing and we are root (CI); elsewhere those tests are skipped and say how to install it. With
# CACHECRAFT_REQUIRE_BROWSER=1 (set by .ci/run) a Chromium that cannot be had stops here with an error, and the
# browser tests fail instead of skipping, so CI is never green without its real-browser checks.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  [ -n "$$CACHECRAFT_CHROMIUM" ] || \
	  { if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || \
	      { echo "could not install chromium: the browser tests will be skipped"; \
	        [ "$${CACHECRAFT_REQUIRE_BROWSER:-0}" = 0 ] || { echo "CACHECRAFT_REQUIRE_BROWSER is set: stopping"; exit 1; }; }; \
	    else echo "chromium not found (not root): the browser tests will be skipped; apt-get install chromium"; \
	      [ "$${CACHECRAFT_REQUIRE_BROWSER:-0}" = 0 ] || { echo "CACHECRAFT_REQUIRE_BROWSER is set: stopping"; exit 1; }; fi; }

test: $(TEST_EXTRAS) sandbox-tools browser
	$(BIN)/cachecraft fetch-instruct
	$(BIN)/python -m pytest -q --durations=25  # the 25 slowest tests at the end: where CI's half hour goes

# DVC (the [pipeline] extra): one stage per notebook in dvc.yaml, the hashes of what made each committed output in
# dvc.lock (docs/reproducing.md).
$(PIPELINE): pyproject.toml $(STAMP)
	$(BIN)/pip install --quiet --disable-pip-version-check -e ".[pipeline]"
	@touch $(PIPELINE)

# At the cpu profile (whose outputs are committed) only the stale notebooks run, through `cachecraft reproduce
# --only` (dvc repro), after dvc.yaml is brought up to the notebooks' imports; FORCE=1 reruns them all. Notebook
# 08's revealed rounds are replayed (their secrets and plans as committed); a round not revealed is frozen and never
# rerun here. Another profile writes under runs/ and runs every notebook.
reproduce: install $(PIPELINE)
ifeq ($(PROFILE),cpu)
	$(BIN)/python -m cachecraft_lib.report.pipeline
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/dvc repro $(if $(FORCE),--force) \
	  $$($(BIN)/python -m cachecraft_lib.report.pipeline --stages)
else
	$(BIN)/cachecraft reproduce --profile $(PROFILE)
endif

# Which committed figures and tables are stale and why, in seconds and without a model; fails when an output no
# longer matches dvc.lock or dvc.yaml no longer matches the notebooks' imports.
check-figures: $(PIPELINE)
	$(BIN)/python -m cachecraft_lib.cli reproduce --check

# dvc.yaml again from the notebooks' imports (after adding a notebook or an import).
pipeline: install
	$(BIN)/python -m cachecraft_lib.report.pipeline

lab: install
	$(BIN)/jupyter lab --notebook-dir=notebooks

lint: install
	$(BIN)/ruff check .

clean-notebooks: install
	$(BIN)/python -c "import sys; from cachecraft_lib.report.notebooks import strip_outputs; [strip_outputs(p) for p in sys.argv[1:]]" notebooks/*.ipynb

train-tiny: install
	$(BIN)/cachecraft train-tiny
