"""The LLM judge against a local OpenAI-compatible /v1/chat/completions serving recorded-format answers: the
request (temperature 0, JSON schema), strict parsing, refusal of a malformed answer, the tie-break rule, errors."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cachecraft_lib.arena.judges import ReviewError, load_bundle
from cachecraft_lib.arena.judges.llm import (
    JudgeConfigError,
    JudgeConnectionError,
    LLMJudge,
    api_key,
    family_of,
    openai_transport,
    parse_answer,
)
from cachecraft_lib.arena.judges.prompt import SCHEMA

ASSETS = Path(__file__).parent / "assets" / "judges"
LLM = ASSETS / "llm"
GPT, CLAUDE = "gpt-4o-mini", "claude-3-5-haiku"


def _answer(name: str) -> dict:
    return json.loads((LLM / name).read_text())


class Endpoint:
    """A local OpenAI-compatible server: model -> recorded chat completion; it keeps every request body."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers, self.requests, self.fail_first = answers, [], 0
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
                if endpoint.fail_first > 0:
                    endpoint.fail_first -= 1
                    self.send_error(503)
                    return
                data = json.dumps(_answer(endpoint.answers[body["model"]])).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint():
    servers = []

    def make(answers: dict[str, str]) -> Endpoint:
        servers.append(Endpoint(answers))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


@pytest.fixture(scope="module")
def bundle():
    return load_bundle(ASSETS / "renamed_snapkv")  # metadata: written_by claude


def test_parses_a_recorded_answer():
    content = _answer("gpt_review.json")["choices"][0]["message"]["content"]
    result = parse_answer(content, GPT)
    assert (result.novelty, result.effectiveness, result.soundness) == (0, 3, 1)
    assert result.flags == ("UNDISCLOSED_PRIOR_ART",) and "SnapKV" in " ".join(result.notes)


@pytest.mark.parametrize("change, field", [({"novelty": "4/5"}, "'novelty' must be an integer from 0 to 5"),
                                           ({"soundness": 4}, "'soundness' must be an integer from 0 to 3"),
                                           ({"effectiveness": 3.0}, "'effectiveness' must be an integer"),
                                           ({"flags": ["PLAGIARISM"]}, "'flags' must be a list of"),
                                           ({"verdict": "good"}, "unexpected field(s) ['verdict']"),
                                           ({"notes": None}, "'notes' must be a string")])
def test_refuses_a_malformed_answer_naming_the_field(change, field):
    good = json.loads(_answer("gpt_review.json")["choices"][0]["message"]["content"])
    with pytest.raises(ReviewError, match=f"judge model {GPT}.*" + field.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]")):
        parse_answer(json.dumps({**good, **change}), GPT)
    missing = {k: v for k, v in good.items() if k != "soundness"}
    with pytest.raises(ReviewError, match=r"missing field\(s\) \['soundness'\]"):
        parse_answer(json.dumps(missing), GPT)
    with pytest.raises(ReviewError, match="did not answer JSON"):
        parse_answer("Novelty: 4/5, looks great", GPT)


def test_agreeing_judges_make_two_calls_at_temperature_0_with_the_schema(endpoint, bundle):
    server = endpoint({GPT: "gpt_review.json", CLAUDE: "claude_close.json"})
    judge = LLMJudge([GPT, CLAUDE], server.base, openai_transport(server.base, "test-key"))
    result = judge.review(bundle)
    assert [r["model"] for r in server.requests] == [GPT, CLAUDE]  # within a point: no third call
    for request in server.requests:
        assert request["path"] == "/v1/chat/completions" and request["auth"] == "Bearer test-key"
        assert request["temperature"] == 0
        assert request["response_format"]["json_schema"]["schema"] == SCHEMA
        assert "DESCRIPTION.md" in request["messages"][1]["content"]
    assert (result.novelty, result.effectiveness, result.soundness) == (0, 3, 1)  # floor of the means
    assert result.flags == ("UNDISCLOSED_PRIOR_ART",)
    assert "tiebreak" not in result.judge


def test_judges_more_than_a_point_apart_get_a_third_call_from_the_other_family(endpoint, bundle):
    server = endpoint({GPT: "gpt_review.json", CLAUDE: "claude_far.json"})
    judge = LLMJudge([CLAUDE, GPT], server.base, openai_transport(server.base, "k"))
    result = judge.review(bundle)
    assert [r["model"] for r in server.requests] == [CLAUDE, GPT, GPT]  # claude wrote it: gpt breaks the tie
    assert (result.novelty, result.soundness) == (0, 1)  # medians of (4, 0, 0) and (3, 1, 1)
    assert result.flags == ("UNDISCLOSED_PRIOR_ART",)  # raised by two of three
    assert result.judge.endswith(f"+tiebreak:{GPT}") and len(result.details["reviews"]) == 3


def test_a_malformed_answer_is_refused_never_scored(endpoint, bundle):
    server = endpoint({GPT: "gpt_review.json", CLAUDE: "malformed.json"})
    judge = LLMJudge([GPT, CLAUDE], server.base, openai_transport(server.base, "k"))
    with pytest.raises(ReviewError, match=f"judge model {CLAUDE}: field 'novelty' must be an integer"):
        judge.review(bundle)


def test_configuration_and_connection_errors_are_clear(monkeypatch):
    for var in ("CACHECRAFT_JUDGE_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(JudgeConfigError, match="no API key"):
        LLMJudge([GPT, CLAUDE])
    with pytest.raises(JudgeConfigError, match="two families"):
        LLMJudge([GPT, "gpt-4o"], transport=lambda m, b: {})
    with pytest.raises(JudgeConfigError, match="two models"):
        LLMJudge([GPT], transport=lambda m, b: {})
    assert family_of("claude=my-finetune") == "claude" and family_of("o3-mini") == "gpt"
    send = openai_transport("http://127.0.0.1:9/v1", "k", timeout=2)
    with pytest.raises(JudgeConnectionError, match="could not reach"):
        send(GPT, {"model": GPT, "messages": [{"role": "user", "content": "x"}]})
    monkeypatch.setenv("CACHECRAFT_JUDGE_API_KEY", "old")
    with pytest.warns(FutureWarning, match="set OPENAI_API_KEY instead"):
        assert api_key() == "old"
    monkeypatch.setenv("OPENAI_API_KEY", "new")
    assert api_key() == "new"


def test_a_failing_endpoint_is_retried_by_the_openai_client(endpoint, bundle):
    server = endpoint({GPT: "gpt_review.json", CLAUDE: "claude_close.json"})
    server.fail_first = 1  # one HTTP 503 before the recorded answers
    judge = LLMJudge([GPT, CLAUDE], server.base, openai_transport(server.base, "k"))
    assert judge.review(bundle).novelty == 0
    assert [r["model"] for r in server.requests] == [GPT, GPT, CLAUDE]
    server.fail_first = 10
    with pytest.raises(JudgeConnectionError, match="answered HTTP 503"):
        LLMJudge([GPT, CLAUDE], server.base, openai_transport(server.base, "k", retries=1)).review(bundle)
