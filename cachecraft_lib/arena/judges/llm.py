"""The LLM judge: any OpenAI-compatible endpoint, two model families, a third call when they disagree.

Each call sends ``prompt.messages(bundle)`` with ``temperature=0`` and ``response_format`` = the JSON schema of
``prompt.SCHEMA`` (structured output), then checks the answer against that same schema with jsonschema
(``parse_answer``; integers are JSON integers, never ``3.0``): a missing or extra field, a score out of range
or not an integer, an unknown flag is refused with ``ReviewError`` naming the field, the model and what was
expected; nothing malformed is ever scored.

Panel (the reference arena's): two models of different families review the bundle. When they differ by more than one
point on any score, or one raises a flag the other does not (a flag zeroes the points, so one judge alone
neither decides nor is ignored), a third call breaks the tie, made with the family that did not write the
submission when ``metadata.yaml`` says which did (``written_by``). The result is the median of three scores
(two: the lower of the rounded mean, i.e. ``floor``) and the flags at least two judges raised (two: both).

Transport: the ``openai`` client (a direct dependency) with its own retries, to any OpenAI-compatible base URL
(e.g. ``https://api.openai.com/v1``); the key comes from ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import openai

from ..schemas import validator
from . import prompt
from .bundle import Bundle
from .review import FLAGS, RANGES, Review, ReviewError

KEY_VAR = "OPENAI_API_KEY"
OLD_KEY_VAR = "CACHECRAFT_JUDGE_API_KEY"  # read (with a warning) only when OPENAI_API_KEY is unset
RETRIES = 2  # the openai client's own retries (with backoff) of a dropped connection, a 429 or a 5xx
# prompt.SCHEMA's validator, the arena's one (``schemas``): a JSON integer is an int, never 3.0 or true
_VALIDATOR = validator(prompt.SCHEMA)
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
    """The endpoint's key from ``OPENAI_API_KEY`` (the one variable every LLM client of the project reads)."""
    env = os.environ if env is None else env
    if env.get(KEY_VAR):
        return env[KEY_VAR]
    if env.get(OLD_KEY_VAR):
        warnings.warn(f"{OLD_KEY_VAR} is deprecated: set {KEY_VAR} instead", FutureWarning, stacklevel=2)
        return env[OLD_KEY_VAR]
    raise JudgeConfigError(f"no API key: set {KEY_VAR} to the endpoint's key; a local server that takes none "
                           f"accepts any value, e.g. {KEY_VAR}=none")


def _expected(name: str) -> str:
    """What a field must be, read from ``prompt.SCHEMA`` (the one schema the model is also sent)."""
    spec = prompt.SCHEMA["properties"][name]
    if spec["type"] == "integer":
        return f"an integer from {spec['minimum']} to {spec['maximum']}"
    if spec["type"] == "array":
        items = spec["items"]
        return f"a list of {items['enum']}" if "enum" in items else f"a list of {items['type']}s"
    return f"a {spec['type']}"


def _schema_error(data: Any, where: str) -> str | None:
    """The first way ``data`` breaks ``prompt.SCHEMA``, said with the field and what was expected (None: valid)."""
    if not isinstance(data, dict):
        return f"{where} answered a {type(data).__name__}, expected a JSON object"
    errors = list(_VALIDATOR.iter_errors(data))
    if not errors:
        return None
    fields = prompt.SCHEMA["required"]
    at_root = {e.validator for e in errors if not e.path}
    if at_root & {"required", "additionalProperties"}:
        missing, extra = [f for f in fields if f not in data], sorted(set(data) - set(fields))
        said = [f"missing field(s) {missing}"] * bool(missing) + [f"unexpected field(s) {extra}"] * bool(extra)
        return f"{where}: {'; '.join(said)}; expected exactly {fields}"
    name = sorted(str(e.path[0]) for e in errors if e.path)[0]
    return f"{where}: field '{name}' must be {_expected(name)}, got {data[name]!r}"


def parse_answer(content: str | None, model: str) -> Review:
    """A chat answer's JSON as a ``Review``, checked against ``prompt.SCHEMA`` with jsonschema; ``ReviewError``
    naming the field and what was expected otherwise."""
    where = f"judge model {model}"
    if not content:
        raise ReviewError(f"{where} returned no content (expected a JSON object following prompt.SCHEMA)")
    try:
        data = json.loads(content)
    except json.JSONDecodeError as err:
        raise ReviewError(f"{where} did not answer JSON ({err.msg} at character {err.pos}): {content[:80]!r}") from None
    problem = _schema_error(data, where)
    if problem:
        raise ReviewError(problem)
    prior = data["prior_work"]
    notes = (data["notes"],) + ((f"prior work: {'; '.join(prior)}",) if prior else ())
    return Review(data["novelty"], data["effectiveness"], data["soundness"], tuple(dict.fromkeys(data["flags"])),
                  notes, f"llm:{model}", {"prior_work": prior}).checked()


def openai_transport(api_base: str, key: str, timeout: float = 120.0, retries: int = RETRIES) -> Transport:
    """Chat completions through the ``openai`` client, which retries a dropped connection, a 429 and a 5xx
    ``retries`` times with backoff; what still fails is a ``JudgeConnectionError`` saying which and why."""
    client = openai.OpenAI(base_url=api_base, api_key=key, timeout=timeout, max_retries=retries)

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
