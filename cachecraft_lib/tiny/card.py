"""Write the embedded model's card (README.md and quality.json) from its measurements (``cachecraft tiny-card``)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd

from ..ruler.tasks import SUBSTITUTES
from .measure import SMOKE_CHECK, heldout_scores, measure, smoke_scores
from .recipe import recipe_from_json, refine_cycles


def uncompressed_bar(scores: dict[str, float]) -> tuple[float, bool]:
    """(worst NIAH score, whether aggregate >= 80 and every NIAH task >= 90) for one length's scores."""
    niah = min(v for t, v in scores.items() if t.startswith("niah"))
    return niah, scores["aggregate"] >= 80 and niah >= 90


def quality_bar(results: dict) -> list[str]:
    """The issue's bar, checked: aggregate >= 80 and every NIAH task >= 90 uncompressed at each length;
    StreamingLLM at r = 0.88 far below (>= 20 points) and SnapKV at r = 0.25 within 5 points."""
    lines = []
    for key, scores in results["scores"].items():
        length, method, _ = key.split("/")
        if method != "no_press":
            continue
        niah, ok = uncompressed_bar(scores)
        stream = results["scores"].get(f"{length}/streaming_llm/0.88", {}).get("aggregate", float("nan"))
        snap = results["scores"].get(f"{length}/snapkv/0.25", {}).get("aggregate", float("nan"))
        comp = scores["aggregate"] - stream >= 20 and abs(scores["aggregate"] - snap) <= 5
        lines.append(f"- {length} tokens: aggregate {scores['aggregate']:.1f}, worst NIAH {niah:.1f} -> "
                     f"{'met' if ok else 'NOT met'}; StreamingLLM 0.88 {stream:.1f}, SnapKV 0.25 {snap:.1f} -> "
                     f"compression {'behaves as for real models' if comp and ok else 'check NOT met'}")
    return lines


def write_card(model_dir: str | Path, results: dict, smoke: dict[str, float], seconds: float,
               heldout: dict | None = None) -> Path:
    """``quality.json`` (machine-readable) and ``README.md`` (the model card) in ``model_dir``."""
    folder = Path(model_dir)
    state = json.loads((folder / "trainer_state.json").read_text())
    history = quality_history(folder / "quality.json", state["step"])
    quality = {**results, "smoke_check": {**SMOKE_CHECK, "tasks": list(SMOKE_CHECK["tasks"]), "scores": smoke},
               "step": state["step"], "measured_in_s": round(seconds), "history": history}
    if heldout:
        quality["heldout"] = heldout
    (folder / "quality.json").write_text(json.dumps(quality, indent=2))
    recipe = state["recipe"]
    table = pd.DataFrame({k: pd.Series(v) for k, v in results["scores"].items()})
    lines = [
        "# tiny-ruler-llama: the embedded default model of CacheCraft Lab", "",
        "A stand-in, not one of the paper's models: a small Llama (RoPE, grouped-query attention) trained in",
        "this repository on offline RULER so that every notebook gives real, non-trivial numbers on two CPU",
        "cores. Results from it are always labelled `embedded tiny model`.", "",
        "## Architecture", "",
        f"- `LlamaForCausalLM`, {recipe['num_layers']} layers, hidden {recipe['hidden_size']}, "
        f"{recipe['num_heads']} query heads, {recipe['num_kv_heads']} KV heads (group size "
        f"{recipe['num_heads'] // recipe['num_kv_heads']}), head dim {recipe['hidden_size'] // recipe['num_heads']}, "
        f"MLP {recipe['intermediate_size']}, RoPE theta {recipe['rope_theta']:g}, tied embeddings, sdpa attention.",
        f"- {state['parameters']:,} parameters; weights {_size_mb(folder):.1f} MB with the tokenizer.",
        f"- Tokenizer: byte-level BPE trained here with `tokenizers` on generator text, digits split into single "
        f"characters, {recipe['vocab_size']} entries.", "",
        "## Training", "",
        f"- Steps done: {state['step']} of {recipe['steps']} (batches of about {recipe['batch_tokens']} tokens), "
        f"training time {state['elapsed_s'] / 3600:.1f} h on {trained_on(state)}, torch "
        f"{state['torch']}. Reproduce with `cachecraft train-tiny` (seed {recipe['seed']}, resumable): a rerun "
        "sees the same data and schedule, but floating-point results differ across thread counts, devices and restarts.",
        "- Data: offline RULER, all 13 tasks, rendered exactly as KVPress's pipeline renders a row without a chat "
        "template: `bos + context`, then `question + \"\\n\" + answer_prefix`, then the answer and `eos`. NIAH "
        "contexts also carry extra questions about their other needles, each masked to see only the context "
        "and itself (KVPress's multi-question rendering): dense answer supervision.",
        "- Curriculum: " + "; ".join(_stage_line(s) for s in recipe["stages"]) + ".",
        f"- Learning rate: AdamW, warmup {recipe['warmup']}, cosine from {recipe['lr']:g} (horizon "
        f"{recipe['lr_decay_steps']}), linear cooldown to 0 at step {recipe.get('base_steps', recipe['steps'])}"
        + _refine_line(recipe) + ".",
        f"- Offline substitutes in the data: {', '.join(sorted(SUBSTITUTES))} (synthetic prose / synthetic QA).", "",
        "## Why 1024 and 2048 tokens", "",
        "The `cpu` profile stands in for the paper's 4096/8192 with the same 1:2 ratio. On two CPU cores a",
        "prefill at 2048 tokens with this model takes a fraction of a second, so the `cpu` grid (two lengths x",
        "five ratios x seven methods) fits the 45-minute budget of `make reproduce`; 4096 would double",
        "prefill cost and quadruple attention, and make training (which must see every length) far longer.",
        "At 1024 tokens RULER's cwe task keeps only a short word list (its one-shot example takes a large",
        "share), which is RULER's own behaviour at short lengths.", "",
        f"## Quality (offline RULER, seed {results['seed']}, {results['samples_per_task']} samples per task)", "",
        md_table(table),
        "", "Columns are `length/method/compression ratio`; scores are RULER's string_match x 100.", "",
        "Quality bar (aggregate >= 80, every NIAH task >= 90, StreamingLLM 0.88 far below, SnapKV 0.25 close):",
        *quality_bar(results), "",
        f"Smoke check (re-run by `tests/test_tiny_model.py`): {json.dumps(smoke)}.", "",
        *_heldout_lines(heldout),
        *_failure_lines(results.get("failures", {})),
        *_no_repeat_lines(results.get("no_repeats", [])),
        *_history_lines(history, quality)]
    (folder / "README.md").write_text("\n".join(lines))
    return folder / "README.md"


def _refine_line(recipe: dict) -> str:
    """The refine cycles after the base run, each ending with the lr at 0 (empty when there are none)."""
    ends = [end for _, end in refine_cycles(recipe_from_json(recipe))]
    if not ends:
        return ""
    n = len(ends)
    return (f"; then {n} refine cycle{'s' if n > 1 else ''}: each re-warms to {recipe['refine_lr']:g} and cools "
            f"linearly to 0 at step {', '.join(map(str, ends))}")


def _stage_line(stage: dict) -> str:
    line = f"to step {stage['until']}: {len(stage['tasks'])} tasks at lengths {min(stage['lengths'])}-{max(stage['lengths'])}"
    if stage.get("weights"):
        heavy = [t for t, w in zip(stage["tasks"], stage["weights"], strict=True) if w > 1]
        line += f", oversampling {', '.join(heavy)}"
    if stage.get("dense_qa"):
        line += ", QA with extra questions about the other documents"
    if stage.get("ordered_sets"):
        line += ", set answers (multivalue values, cwe words) in the order the context shows them"
    if stage.get("set_orders"):
        line += f", list answers (multivalue, vt, cwe, fwe) also asked in {stage['set_orders']} more orders"
    if stage.get("unlikelihood"):
        line += f", unlikelihood (weight {stage['unlikelihood']:g}) on tokens that would write a listed item again"
    return line


def quality_history(path: Path, step: int) -> list[dict]:
    """Earlier measurements of this model (aggregates per column), carried over when the card is rebuilt
    at a new step, so the card shows what further training bought."""
    if not path.exists():
        return []
    old = json.loads(path.read_text())
    history = list(old.get("history", []))
    if old.get("step") != step and "scores" in old:
        entry = {"step": old["step"], "seed": old.get("seed"), "samples_per_task": old.get("samples_per_task"),
                 "aggregate": {k: v.get("aggregate") for k, v in old["scores"].items()}}
        if "heldout" in old:
            entry["heldout_aggregate"] = {k: v.get("aggregate") for k, v in old["heldout"]["scores"].items()}
        history.append(entry)
    return history


def _heldout_lines(heldout: dict | None) -> list[str]:
    """The card's held-out section: uncompressed scores per task on the second seed, and the bar on them."""
    if not heldout:
        return []
    table = pd.DataFrame({f"{length} tokens": pd.Series(s) for length, s in heldout["scores"].items()})
    bar = []
    for length, s in heldout["scores"].items():
        niah, met = uncompressed_bar(s)
        bar.append(f"- {length} tokens: aggregate {s['aggregate']:.1f}, worst NIAH {niah:.1f} -> {'met' if met else 'NOT met'}")
    return [f"## Held-out check (seed {heldout['seed']}, {heldout['samples_per_task']} samples per task, no compression)",
            "", "A second unseen seed with more samples per task, less noisy than the table above; checkpoints "
            "are chosen on it.", "", md_table(table), "", *bar, ""]


def _failure_lines(failures: dict[str, dict]) -> list[str]:
    """The card's "How it fails" section: misses per task and length, and one example per task."""
    if not failures:
        return []
    table = pd.DataFrame({f"{length} tokens": {t: f"{f['missed']}/{f['of']} ({f['repeating']})" for t, f in per_task.items()}
                          for length, per_task in failures.items()}).fillna("-")
    longest = max(failures, key=int)
    examples = [f"- {task}: expected `{' '.join(f['example']['expected'])}`, predicted "
                f"`{f['example']['predicted'] or '(empty)'}`" for task, f in failures[longest].items()]
    return ["## How it fails (no compression)", "",
            "Answers that missed a reference, of all answers; in brackets, how many of the misses write one item "
            "twice (the model finds an item, then writes it again instead of the next one):",
            "", md_table(table), "", f"First miss per task at {longest} tokens:", "", *examples, ""]


NO_REPEAT_COLUMNS = (("greedy", "greedy"), ("no_repeats", "no repeats"))  # no_repeat_recall's columns, card headers


def _no_repeat_lines(records: list[dict]) -> list[str]:
    """The card's section on list answers decoded with repeats banned (``diagnose.no_repeat_recall``)."""
    if not records:
        return []
    df = pd.DataFrame(records)
    table = pd.DataFrame({f"{length} {name}": rows.set_index("task")[column]
                          for length, rows in df.groupby("length") for column, name in NO_REPEAT_COLUMNS})
    return ["## If it could not repeat itself (a diagnostic, not a score)", "",
            f"The list tasks decoded greedily as the pipeline does, and again with every token that started an "
            f"earlier word of the answer banned from starting another ({int(df['samples'].iloc[0])} samples per "
            "task, card seed, no compression, `cachecraft_lib.tiny.diagnose`). Where banning lifts the score, "
            "words not yet written come next in the model's ranking, though teacher-forced it seldom ranks the "
            "right item first (cwe, fwe: the repository README, unlikelihood training); where banning does not "
            "lift it, the items are not found:", "", md_table(table), ""]


def _history_lines(history: list[dict], current: dict) -> list[str]:
    if not history:
        return []
    now = {"step": current["step"], "aggregate": {k: v.get("aggregate") for k, v in current["scores"].items()}}
    if "heldout" in current:
        now["heldout_aggregate"] = {k: v.get("aggregate") for k, v in current["heldout"]["scores"].items()}

    def column(r: dict) -> pd.Series:
        held = {f"held-out {length}": v for length, v in r.get("heldout_aggregate", {}).items()}
        return pd.Series({**r["aggregate"], **held})

    table = pd.DataFrame({f"step {r['step']}": column(r) for r in [*history, now]})
    return ["## Aggregate over training", "", md_table(table), ""]


def trained_on(state: dict) -> str:
    """Where the last checkpoint was trained: a GPU's name, or the CPU thread count (older states have only that)."""
    device = state.get("device", "cpu")
    return device if not device.startswith("cpu") else f"{state.get('threads', '?')} CPU thread(s)"


def _size_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.glob("*") if p.is_file() and not p.name.startswith(".")
               and p.suffix in {".safetensors", ".json"}) / 1e6


def md_table(table: pd.DataFrame) -> str:
    from ..report.figures import to_markdown

    return to_markdown(table, floatfmt=".1f")  # formatted like the bar lines (numpy rounds 61.85 down)


def build_card(model_dir: str | Path, lengths: tuple[int, ...] = (1024, 2048), samples_per_task: int = 20,
               progress: bool = True, heldout_samples: int = 12) -> Path:
    """Measure the model in ``model_dir`` and (re)write its card (``heldout_samples`` 0 skips the held-out check)."""
    from ..models.loading import load_model

    start = time.time()
    model, tokenizer = load_model(model_dir, device="cpu")
    results = measure(model, tokenizer, lengths, samples_per_task, progress=progress)
    smoke = smoke_scores(model, tokenizer)
    heldout = heldout_scores(model, tokenizer, lengths, heldout_samples, progress=progress) if heldout_samples else None
    from .diagnose import no_repeat_recall

    results["no_repeats"] = no_repeat_recall(model, tokenizer, lengths, samples_per_task).to_dict("records")
    return write_card(model_dir, results, smoke, time.time() - start, heldout)
