"""The LLM judge: any OpenAI-compatible endpoint, two model families, a third call when they disagree.

Each call sends ``prompt.messages(bundle)`` with ``temperature=0`` and ``response_format`` = the JSON schema of
``prompt.SCHEMA`` (structured output), then parses the answer strictly (``parse_answer``): a missing or extra
field, a score out of range or not an integer, an unknown flag is refused with ``ReviewError`` naming the
field, the model and what was expected; nothing malformed is ever scored.

Panel (the reference arena's): two models of different families review the bundle. When they differ by more than one
point on any score, or one raises a flag the other does not (a flag zeroes the points, so one judge alone
neither decides nor is ignored), a third call breaks the tie, made with the family that did not write the
submission when ``metadata.yaml`` says which did (``written_by``). The result is the median of three scores
(two: the lower of the rounded mean, i.e. ``floor``) and the flags at least two judges raised (two: both).

Transport: the ``openai`` client when installed (it is, through openevolve), else plain HTTP (``urllib``) to
``<api_base>/chat/completions``; both take the same base URL (e.g. ``https://api.openai.com/v1``).
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import prompt
from .bundle import Bundle
from .review import FLAGS, RANGES, Review, ReviewError

KEY_VARS = ("CACHECRAFT_JUDGE_API_KEY", "OPENAI_API_KEY")
KNOWN_FAMILIES = ("gpt", "claude", "gemini", "llama", "qwen", "mistral", "deepseek", "grok", "phi", "gemma")
Transport = Callable[[str, dict[str, Any]], dict[str, Any]]  # (model, request body) -> chat completion JSON


class JudgeConfigError(RuntimeError):
    """The LLM judge cannot start (no key, one model family); the message says what to set."""


class JudgeConnectionError(RuntimeError):
    """The endpoint could not be reached or answered with an HTTP error; the message says which and why."""


def family_of(model: str) -> str:
    """A model's family: ``family=model`` explicitly, a known name inside it (gpt, claude, ...), else its prefix."""
    if "=" in model:
        return model.split("=", 1)[0].strip().lower()
    lowered = model.lower()
    if lowered.startswith(("o1", "o3", "o4")):
        return "gpt"
    for name in KNOWN_FAMILIES:
        if name in lowered:
            return name
    return lowered.replace("/", "-").split("-")[0]


def model_id(model: str) -> str:
    return model.split("=", 1)[1].strip() if "=" in model else model


def api_key(env: dict[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    for var in KEY_VARS:
        if env.get(var):
            return env[var]
    raise JudgeConfigError(f"no API key: set {KEY_VARS[0]} (or {KEY_VARS[1]}) to the endpoint's key; a local "
                           "server that takes none accepts any value, e.g. CACHECRAFT_JUDGE_API_KEY=none")


def parse_answer(content: str | None, model: str) -> Review:
    """A chat answer's JSON as a ``Review``; ``ReviewError`` naming the field and what was expected otherwise."""
    where = f"judge model {model}"
    if not content:
        raise ReviewError(f"{where} returned no content (expected a JSON object following prompt.SCHEMA)")
    try:
        data = json.loads(content)
    except json.JSONDecodeError as err:
        raise ReviewError(f"{where} did not answer JSON ({err.msg} at character {err.pos}): {content[:80]!r}") from None
    if not isinstance(data, dict):
        raise ReviewError(f"{where} answered a {type(data).__name__}, expected a JSON object")
    fields = prompt.SCHEMA["required"]
    missing, extra = [f for f in fields if f not in data], sorted(set(data) - set(fields))
    if missing or extra:
        raise ReviewError(f"{where}: " + (f"missing field(s) {missing}" if missing else "")
                          + ("; " if missing and extra else "") + (f"unexpected field(s) {extra}" if extra else "")
                          + f"; expected exactly {fields}")
    for name, (low, high) in RANGES.items():
        value = data[name]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ReviewError(f"{where}: field '{name}' must be an integer from {low} to {high}, got {value!r}")
    flags = data["flags"]
    if not isinstance(flags, list) or not all(isinstance(f, str) and f in FLAGS for f in flags):
        raise ReviewError(f"{where}: field 'flags' must be a list of {list(FLAGS)}, got {flags!r}")
    prior = data["prior_work"]
    if not isinstance(prior, list) or not all(isinstance(p, str) for p in prior):
        raise ReviewError(f"{where}: field 'prior_work' must be a list of strings, got {prior!r}")
    if not isinstance(data["notes"], str):
        raise ReviewError(f"{where}: field 'notes' must be a string, got {data['notes']!r}")
    notes = (data["notes"],) + ((f"prior work: {'; '.join(prior)}",) if prior else ())
    return Review(data["novelty"], data["effectiveness"], data["soundness"], tuple(dict.fromkeys(flags)), notes,
                  f"llm:{model}", {"prior_work": prior}).checked()


def openai_transport(api_base: str, key: str, timeout: float = 120.0) -> Transport:
    """Chat completions through the ``openai`` client, or plain HTTP when it is not installed."""
    try:
        import openai
    except ImportError:
        return http_transport(api_base, key, timeout)
    client = openai.OpenAI(base_url=api_base, api_key=key, timeout=timeout, max_retries=0)

    def send(model: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            return client.chat.completions.create(**body).model_dump()
        except openai.APIConnectionError as err:
            raise JudgeConnectionError(f"could not reach {api_base} ({err.__cause__ or err}); check --api-base "
                                       "(an OpenAI-compatible base URL, e.g. http://localhost:8000/v1)") from None
        except openai.APIStatusError as err:
            raise JudgeConnectionError(f"{api_base} answered HTTP {err.status_code} for model {model}: "
                                       f"{str(err.message)[:200]}") from None
    return send


def http_transport(api_base: str, key: str, timeout: float = 120.0) -> Transport:
    """Chat completions by plain HTTP POST to ``<api_base>/chat/completions``."""
    import urllib.error
    import urllib.request

    url = api_base.rstrip("/") + "/chat/completions"

    def send(model: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(url, json.dumps(body).encode(), method="POST", headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {key}"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as err:
            raise JudgeConnectionError(f"{url} answered HTTP {err.code} for model {model}: "
                                       f"{err.read()[:200]!r}") from None
        except (urllib.error.URLError, OSError) as err:
            raise JudgeConnectionError(f"could not reach {url} ({getattr(err, 'reason', err)}); check --api-base "
                                       "(an OpenAI-compatible base URL, e.g. http://localhost:8000/v1)") from None
    return send


@dataclass
class LLMJudge:
    """Two models of different families (``models``), a tie-breaking third call; see the module doc."""

    models: tuple[str, ...] | list[str] = ()
    api_base: str = "https://api.openai.com/v1"
    transport: Transport | None = None
    timeout: float = 120.0
    calls: list[str] = field(default_factory=list, init=False)  # models called, in order (for the record)

    def __post_init__(self) -> None:
        self.models = tuple(self.models)
        if len(self.models) != 2:
            raise JudgeConfigError(f"the LLM judge needs two models of different families (two --llm-model), got "
                                   f"{list(self.models)}")
        families = [family_of(m) for m in self.models]
        if families[0] == families[1]:
            raise JudgeConfigError(f"both models are of family {families[0]!r}; the panel needs two families "
                                   "(write FAMILY=MODEL to name a family the name does not show)")
        if self.transport is None:
            self.transport = openai_transport(self.api_base, api_key(), self.timeout)

    def ask(self, model: str, bundle: Bundle) -> Review:
        """One model's review of the bundle (temperature 0, structured output, strictly parsed)."""
        self.calls.append(model)
        body = {"model": model_id(model), "temperature": 0, "messages": prompt.messages(bundle.as_prompt()),
                "response_format": prompt.RESPONSE_FORMAT}
        answer = self.transport(model_id(model), body)
        try:
            content = answer["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise ReviewError(f"judge model {model}: the endpoint's answer has no choices[0].message.content "
                              f"(not a chat completion): {str(answer)[:120]}") from None
        return parse_answer(content, model)

    def tiebreaker(self, bundle: Bundle) -> str:
        """The model of the family that did not write the submission (the first model when unknown)."""
        wrote = bundle.written_by
        others = [m for m in self.models if wrote is None or family_of(m) != family_of(wrote)]
        return others[0] if others else self.models[0]

    def review(self, bundle: Bundle) -> Review:
        """The panel's review: two calls, a third when they disagree (see the module doc)."""
        self.calls = []
        first, second = (self.ask(m, bundle) for m in self.models)
        reviews = [first, second]
        if disagree(first, second):
            third = self.tiebreaker(bundle)
            reviews.append(self.ask(third, bundle))
        return combine(reviews, self.calls, bundle.written_by)


def disagree(a: Review, b: Review) -> bool:
    """More than one point apart on any score, or one flag raised by only one of them."""
    return any(abs(getattr(a, s) - getattr(b, s)) > 1 for s in RANGES) or set(a.flags) != set(b.flags)


def combine(reviews: list[Review], models: list[str], written_by: str | None = None) -> Review:
    """Two reviews: floor of the mean, flags both raised; three: median, flags at least two raised."""
    scores = {}
    for name in RANGES:
        values = [getattr(r, name) for r in reviews]
        scores[name] = int(statistics.median(values)) if len(values) == 3 else math.floor(sum(values) / len(values))
    counts = {f: sum(f in r.flags for r in reviews) for f in FLAGS}
    flags = tuple(f for f in FLAGS if counts[f] >= 2)
    notes = tuple(f"{m}: {n}" for m, r in zip(models, reviews, strict=True) for n in r.notes)
    if len(reviews) == 3:
        notes += (f"tie broken by {models[2]} (the submission's family: {written_by or 'not stated'})",)
    judge = "llm:" + "+".join(models[:2]) + (f"+tiebreak:{models[2]}" if len(reviews) == 3 else "")
    details = {"reviews": [dict(r.as_dict(), model=m) for m, r in zip(models, reviews, strict=True)]}
    return Review(scores["novelty"], scores["effectiveness"], scores["soundness"], flags, notes, judge,
                  details).checked()
