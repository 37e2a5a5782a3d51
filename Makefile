# CacheCraft Lab. Two commands do everything: `make reproduce` and `make test` (README).
# Each creates .venv if needed and installs into it. torch is pinned to the CPU build that installs in
# seconds here; a GPU user installs a CUDA build of torch into .venv first (README), which is kept.

PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_SPEC ?= torch==2.13.0
PROFILE ?= cpu
STAMP := $(VENV)/.cachecraft-installed
EXTRAS ?= instruct,ray,serve
TEST_EXTRAS := $(VENV)/.cachecraft-test-extras

.PHONY: install test reproduce lab lint clean-notebooks train-tiny browser sandbox-tools

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

reproduce: install
	$(BIN)/cachecraft reproduce --profile $(PROFILE)

lab: install
	$(BIN)/jupyter lab --notebook-dir=notebooks

lint: install
	$(BIN)/ruff check .

clean-notebooks: install
	$(BIN)/python -c "import sys; from cachecraft_lib.report.notebooks import strip_outputs; [strip_outputs(p) for p in sys.argv[1:]]" notebooks/*.ipynb

train-tiny: install
	$(BIN)/cachecraft train-tiny
