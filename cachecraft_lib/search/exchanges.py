"""What the search's mutator was asked and answered, and what became of each answer (an LLM run's report).

OpenEvolve records every iteration of a run (``cfg.evolution_trace``, prompts included): an answer that gave a
child in ``evolution_trace.jsonl`` (the evaluator's metrics and artifacts with it), one that gave none in
``evolution_trace_failures.jsonl`` (OpenEvolve's reason: no SEARCH/REPLACE diff, a diff that does not apply, a
failed LLM call). ``verdicts`` puts both into one table, one row per iteration; ``write_exchanges`` writes the
prompts and answers as a readable ``llm_exchanges.md`` in the run folder.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .runlog import _jsonl

OUTCOMES = ("valid child", "invalid child", "no child")


def _prompt_text(prompt: dict | None) -> str:
    if not prompt:
        return ""
    return f"[system]\n{prompt.get('system', '')}\n\n[user]\n{prompt.get('user', '')}"


def verdicts(folder: str | Path) -> pd.DataFrame:
    """One row per iteration: ``outcome`` (valid child / invalid child / no child), ``reason`` (the evaluator's
    INVALID reason, or OpenEvolve's reason for no child), the prompt's and the answer's length, and the answer."""
    folder = Path(folder)
    rows = []
    for rec in _jsonl(folder / "evolution_trace.jsonl"):
        metrics, artifacts = rec.get("child_metrics") or {}, rec.get("artifacts") or {}
        valid = bool(metrics.get("valid", 0.0))
        reason = "" if valid else (artifacts.get("invalid") or metrics.get("error_message") or
                                   ("evaluator error" if "error" in metrics else ""))
        rows.append({"iteration": rec.get("iteration"), "outcome": OUTCOMES[0] if valid else OUTCOMES[1],
                     "reason": str(reason), "fitness": metrics.get("combined_score", 0.0),
                     "prompt": _prompt_text(rec.get("prompt")), "response": rec.get("llm_response") or ""})
    for rec in _jsonl(folder / "evolution_trace_failures.jsonl"):
        rows.append({"iteration": rec.get("iteration"), "outcome": OUTCOMES[2], "reason": str(rec.get("error", "")),
                     "fitness": float("nan"), "prompt": _prompt_text(rec.get("prompt")),
                     "response": rec.get("llm_response") or ""})
    table = pd.DataFrame(rows, columns=["iteration", "outcome", "reason", "fitness", "prompt", "response"])
    table["prompt_chars"] = table.prompt.str.len()
    table["response_chars"] = table.response.str.len()
    return table.sort_values("iteration", kind="stable").reset_index(drop=True)


def write_exchanges(folder: str | Path, name: str = "llm_exchanges.md") -> Path:
    """Every iteration's prompt, answer and verdict as Markdown in the run folder; returns its path."""
    folder = Path(folder)
    parts = [f"# What the mutator was asked and answered ({folder.name})\n"]
    for r in verdicts(folder).itertuples():
        parts.append(f"## Iteration {r.iteration}: {r.outcome}" + (f" ({r.reason})" if r.reason else "") + "\n")
        parts.append(f"### Sent ({r.prompt_chars} characters)\n\n````\n{r.prompt}\n````\n")
        parts.append(f"### Answered ({r.response_chars} characters)\n\n````\n{r.response}\n````\n")
    path = folder / name
    path.write_text("\n".join(parts))
    return path
