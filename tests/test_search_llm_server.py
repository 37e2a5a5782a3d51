"""The search's LLM mutator against a real OpenAI-compatible server: ``transformers serve`` on SmolLM2-135M-Instruct.

The test starts its own server (one CPU thread, a free port), runs one search iteration with
``mutator="openai"`` through it, and stops it. What must hold: the request reached the server and was answered,
OpenEvolve recorded what it sent (the program to improve) and what came back, every iteration got a verdict
(a valid child, an invalid child with the evaluator's reason, or no child with OpenEvolve's reason), the run ends
with ``NoCandidates`` (not a hang or a traceback deep in OpenEvolve) when no answer held an applicable diff, and
the server stops cleanly. A 135M model writes no usable diff in 24 tokens: the test checks the path, not quality.

Like the other SmolLM2 tests it fails without ``cachecraft fetch-instruct`` (``make test`` runs it first).
"""

from __future__ import annotations

import json
import urllib.request

import pytest

from cachecraft_lib.profiles import get_profile
from cachecraft_lib.search.exchanges import OUTCOMES, verdicts
from cachecraft_lib.search.llm_server import InstructServer, ServerError


@pytest.mark.slow
def test_openai_mutator_through_a_local_transformers_server(tmp_path):
    from cachecraft_lib.search.evolve import NoCandidates, evolve

    profile = get_profile("smoke", tasks=("niah_single_1",))
    server = InstructServer(device="cpu", threads=1, log_path=tmp_path / "server.log")
    with server:
        with urllib.request.urlopen(f"{server.base_url}/models", timeout=10) as response:
            assert json.load(response)["object"] == "list"
        try:
            evolve("v5", 1, tmp_path / "run", profile, mutator="openai", gate=0.0, isolate=False,
                   ollama_model="smollm2", api_base=server.base_url, api_key="none", max_tokens=24)
        except NoCandidates as err:  # the usual outcome with a 135M model: said plainly, the run folder kept
            assert "llm_exchanges.md" in str(err)
        assert server.chat_requests() and set(server.chat_requests()) == {200}  # it reached the server
    assert server.process.returncode is not None  # stopped
    table = verdicts(tmp_path / "run")
    assert list(table.iteration) == [1]
    for row in table.itertuples():
        assert row.outcome in OUTCOMES
        assert row.outcome == "valid child" or row.reason  # an invalid child or no child always says why
        assert "# Current Program" in row.prompt and "EVOLVE-BLOCK" in row.prompt  # what OpenEvolve sent
        assert row.response  # what the server answered
    report = (tmp_path / "run" / "llm_exchanges.md").read_text()
    assert "## Iteration 1" in report and table.response[0][:40] in report


def test_a_missing_model_folder_is_refused_before_starting(tmp_path):
    server = InstructServer(model=tmp_path / "no-such-model", device="cpu")
    with pytest.raises(ServerError, match="does not exist"):
        server.start()
    assert server.process is None  # nothing was started


def test_the_server_command_and_environment():
    server = InstructServer(model="/models/x", port=8123, threads=1)
    cmd = server.command()
    assert cmd[1:4] == ["-m", "transformers.cli.transformers", "serve"] and "--force-model" in cmd
    assert cmd[cmd.index("--model-timeout") + 1] == "-1"  # never unloaded between iterations
    assert server.environment()["OMP_NUM_THREADS"] == "1" and server.base_url == "http://127.0.0.1:8123/v1"


def test_verdicts_give_every_iteration_an_outcome_and_a_reason(tmp_path):
    """A valid child, an invalid child (the evaluator's reason) and an answer with no child (OpenEvolve's reason)."""
    from cachecraft_lib.search.exchanges import write_exchanges

    prompt = {"system": "S", "user": "# Current Program\n```python\nx = 1\n```"}
    trace = [{"iteration": 2, "child_metrics": {"valid": 1.0, "combined_score": 12.5}, "artifacts": {},
              "prompt": prompt, "llm_response": "<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE"},
             {"iteration": 3, "child_metrics": {"valid": 0.0, "combined_score": 0.0},
              "artifacts": {"invalid": "kept 10 tokens, expected 8"}, "prompt": prompt, "llm_response": "diff"}]
    failures = [{"iteration": 1, "error": "No valid diffs found in response", "prompt": prompt,
                 "llm_response": "I cannot help"}]
    (tmp_path / "evolution_trace.jsonl").write_text("\n".join(json.dumps(r) for r in trace) + "\n")
    (tmp_path / "evolution_trace_failures.jsonl").write_text(json.dumps(failures[0]) + "\n")
    table = verdicts(tmp_path)
    assert list(table.iteration) == [1, 2, 3]
    assert list(table.outcome) == ["no child", "valid child", "invalid child"]
    assert table.reason[0].startswith("No valid diffs") and table.reason[1] == "" and "expected 8" in table.reason[2]
    report = write_exchanges(tmp_path).read_text()
    assert report.count("## Iteration") == 3 and "I cannot help" in report and "# Current Program" in report


def test_cli_offers_the_server_and_the_answer_cap():
    from cachecraft_lib.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(["serve-instruct", "--port", "0", "--threads", "1"])
    assert args.port == 0 and args.threads == 1 and args.device == "auto"
    args = parser.parse_args(["evolve", "--mutator", "openai", "--api-base", "http://127.0.0.1:1/v1",
                              "--max-tokens", "64"])
    assert args.max_tokens == 64
