"""The RULER grid engine: one cell = (model, length, method, ratio, query-aware, samples), one result file each.

How a cell is computed: prefill the context under the method's press, answer greedily with the row's
``max_new_tokens``, score with RULER's metrics. Single-pass presses compress inside a hook *after* each
layer's full prefill forward, so the prefill activations are the same for every press and ratio: the
engine prefills each sample once (``SharedPrefill``), applies each press's ``compress`` to the captured
per-layer keys/values, and decodes from that cache. A test checks that this gives the same answers as
KVPress's pipeline. Finch changes the prefill input (question and delimiter inside the context), so it
runs through the pipeline on its own.

Results: ``<out>/<cell>/result.json`` (predictions, per-task scores, aggregate, timings, config and a
fingerprint of config + dataset + library version), written atomically, plus KVPress's own layout
(``predictions.csv``, ``metrics.json``, ``config.yaml``). While a cell is in progress its answers are
appended to ``partial.jsonl``, so an interrupted run loses at most the sample in flight. A re-run skips
finished cells and recomputes a cell whose file is corrupt or whose fingerprint differs.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import yaml
from kvpress import BasePress
from tqdm.auto import tqdm

from . import __version__
from .atomic import atomic_write_text
from .models import is_embedded, load_model
from .pipeline import Answerer
from .presses import REGISTRY, make_press
from .profiles import Profile
from .ruler import GENERATOR_VERSION, load, score

log = logging.getLogger(__name__)
RESULT = "result.json"
PARTIAL = "partial.jsonl"
ENGINE_VERSION = "1"


@dataclass(frozen=True)
class Cell:
    """One grid cell. ``samples_per_task=None`` means the full dataset (500 per task)."""

    model: str
    length: int
    method: str
    ratio: float
    query_aware: bool = False
    samples_per_task: int | None = None
    seed: int = 42
    ruler_source: str = "auto"
    tasks: tuple[str, ...] | None = None  # None = all 13
    max_new_tokens: int | None = None  # None = the row's (KVPress's --max_new_tokens override otherwise)

    @property
    def key(self) -> str:
        """Folder name, KVPress-style: ``ruler__4096__<model>__<method>__0.88[__query_aware]__n10__seed42``."""
        model = Path(self.model).name if Path(self.model).exists() else self.model.replace("/", "--")
        parts = ["ruler", str(self.length), model, self.method, f"{self.ratio:.2f}"]
        if self.query_aware:
            parts.append("query_aware")
        parts += [f"n{self.samples_per_task or 'all'}", f"seed{self.seed}", self.ruler_source]
        if self.tasks is not None:
            parts.append("tasks-" + hashlib.sha256(",".join(self.tasks).encode()).hexdigest()[:8])
        if self.max_new_tokens is not None:
            parts.append(f"max{self.max_new_tokens}")
        return "__".join(parts)

    @property
    def group(self) -> tuple:
        """Cells of one group share the model, the dataset and so the prefill of every sample."""
        return (self.model, self.length, self.query_aware, self.samples_per_task, self.seed, self.ruler_source,
                self.tasks, self.max_new_tokens)

    def config(self) -> dict[str, Any]:
        return asdict(self)


def grid_cells(profile: Profile, methods: Iterable[str] | None = None, ratios: Iterable[float] | None = None,
               lengths: Iterable[int] | None = None, query_aware: bool | None = None,
               include_no_press: bool = True) -> list[Cell]:
    """The profile's grid: every model x length x method x ratio, plus one ``no_press`` cell per model x length."""
    methods = list(profile.methods if methods is None else methods)
    unknown = [m for m in methods if m not in REGISTRY]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; registered: {', '.join(REGISTRY)}")
    qa = profile.query_aware if query_aware is None else query_aware
    common = dict(query_aware=qa, samples_per_task=profile.samples_per_task, seed=profile.seed,
                  ruler_source=profile.ruler_source, tasks=profile.tasks, max_new_tokens=profile.max_new_tokens)
    cells = []
    for model in profile.models:
        for length in (lengths or profile.lengths):
            if include_no_press and "no_press" not in methods:
                cells.append(Cell(model, length, "no_press", 0.0, **common))
            for method in methods:
                for ratio in ([0.0] if method == "no_press" else (ratios or profile.ratios)):
                    cells.append(Cell(model, length, method, float(ratio), **common))
    return cells


def parse_shard(spec: str) -> tuple[int, int]:
    """``"i/n"`` (0-based i) -> (i, n), checked."""
    try:
        i, n = (int(x) for x in spec.split("/"))
    except ValueError:
        raise ValueError(f"--shard must look like i/n (e.g. 0/4), got {spec!r}") from None
    if not (n >= 1 and 0 <= i < n):
        raise ValueError(f"--shard {spec}: need n >= 1 and 0 <= i < n")
    return i, n


def select_shard(cells: list[Cell], index: int, count: int) -> list[Cell]:
    """Every ``count``-th cell in key order, starting at ``index``: disjoint shards that cover the grid."""
    return sorted(cells, key=lambda c: c.key)[index::count]


# ------------------------------------------------------------------------------------------ storage
def dataset_fingerprint(df: pd.DataFrame) -> str:
    h = hashlib.sha256()
    for row in df[["context", "question", "answer_prefix", "task", "max_new_tokens"]].itertuples(index=False):
        h.update("\x1f".join(map(str, row)).encode())
    for answer in df["answer"]:
        h.update("\x1e".join(answer).encode())
    return h.hexdigest()[:16]


def fingerprint(cell: Cell, dataset_fp: str) -> str:
    blob = json.dumps({"cell": cell.config(), "dataset": dataset_fp, "cachecraft_lib": __version__,
                       "engine": ENGINE_VERSION, "ruler_generator": GENERATOR_VERSION}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class CellStore:
    """Result files of a grid folder: status, partial answers, final result and KVPress's layout."""

    def __init__(self, out_dir: str | Path) -> None:
        self.root = Path(out_dir)

    def folder(self, cell: Cell) -> Path:
        return self.root / cell.key

    def status(self, cell: Cell, fp: str) -> str:
        """``done``, ``missing``, ``corrupt`` (unreadable or incomplete) or ``stale`` (other fingerprint)."""
        path = self.folder(cell) / RESULT
        if not path.exists():
            return "missing"
        try:
            result = json.loads(path.read_text())
            complete = all(k in result for k in ("fingerprint", "predictions", "scores", "config"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            return "corrupt"
        if not complete:
            return "corrupt"
        return "done" if result["fingerprint"] == fp else "stale"

    def partial(self, cell: Cell, fp: str) -> dict[int, dict]:
        """Answers already computed for an unfinished cell with this fingerprint (a torn last line is ignored)."""
        path = self.folder(cell) / PARTIAL
        out: dict[int, dict] = {}
        if not path.exists():
            return out
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if rec.get("fingerprint") == fp:
                out[rec["index"]] = rec
        return out

    def append(self, cell: Cell, fp: str, record: dict) -> None:
        path = self.folder(cell) / PARTIAL
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            f.write(json.dumps({**record, "fingerprint": fp}) + "\n")

    def finish(self, cell: Cell, fp: str, df: pd.DataFrame, records: dict[int, dict], dataset: dict,
               timings: dict[str, float]) -> dict:
        """Score and write ``result.json`` atomically, then KVPress's ``predictions.csv``/``metrics.json``/``config.yaml``."""
        preds = df.assign(predicted_answer=[records[i]["predicted_answer"] for i in range(len(df))])
        scores = score(preds)
        result = {
            "fingerprint": fp, "config": cell.config(), "dataset": dataset, "scores": scores,
            "aggregate": scores["aggregate"], "timings": timings,
            "embedded_model": is_embedded(cell.model),
            "library": _versions(), "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "predictions": [{"index": i, "task": r.task, "answer": list(r.answer),
                             "predicted_answer": records[i]["predicted_answer"], "seconds": records[i]["seconds"]}
                            for i, r in enumerate(df.itertuples())],
        }
        folder = self.folder(cell)
        kv = preds.drop(columns=["context"]).assign(compression_ratio=cell.ratio)
        kv.to_csv(folder / "predictions.csv", index=False)
        atomic_write_text(folder / "metrics.json", json.dumps(
            {t: {"string_match": v} for t, v in scores.items() if t != "aggregate"}, indent=2))
        press = make_press(cell.method, cell.ratio)
        atomic_write_text(folder / "config.yaml", yaml.safe_dump({
            "dataset": "ruler", "data_dir": str(cell.length), "model": cell.model, "press_name": cell.method,
            "compression_ratio": cell.ratio, "query_aware": cell.query_aware or REGISTRY[cell.method].needs_query_aware,
            "samples_per_task": cell.samples_per_task, "seed": cell.seed, "ruler_source": dataset["source"],
            "press_init_command": repr(press) if press is not None else "None"}, sort_keys=False))
        atomic_write_text(folder / RESULT, json.dumps(result, indent=1))
        (folder / PARTIAL).unlink(missing_ok=True)
        return result


def _versions() -> dict[str, str]:
    import kvpress
    import transformers

    return {"cachecraft_lib": __version__, "kvpress": getattr(kvpress, "__version__", "0.5.5"),
            "transformers": transformers.__version__, "torch": torch.__version__}


# ------------------------------------------------------------------------------------ shared prefill
class _Capture(BasePress):
    """Records each layer's prefill inputs to ``compress`` and leaves the cache untouched."""

    def __init__(self) -> None:
        self.layers: list[tuple] = []

    def compress(self, module, hidden_states, keys, values, attentions, kwargs):
        keep = {k: kwargs[k] for k in ("position_embeddings", "cache_position", "attention_mask", "position_ids")
                if k in kwargs}
        self.layers.append((module, hidden_states, keys, values, keep))
        return keys, values


class SharedPrefill:
    """One prefill of a context, from which the compressed cache of any single-pass press is derived."""

    def __init__(self, model: Any, context_ids: torch.Tensor) -> None:
        from transformers import DynamicCache

        self.model = model
        self.context_length = context_ids.shape[1]
        capture = _Capture()
        start = time.perf_counter()
        with torch.no_grad(), capture(model):
            model.model(input_ids=context_ids.to(model.device), past_key_values=DynamicCache())
        self.seconds = time.perf_counter() - start
        self.layers = capture.layers

    def cache_for(self, press: BasePress | None):
        """A fresh cache holding what ``press`` would have kept (as its hook would have, layer by layer)."""
        from transformers import DynamicCache

        cache = DynamicCache()
        if press is not None:
            press.post_init_from_model(self.model)
        with torch.no_grad():
            for module, hidden, keys, values, kwargs in self.layers:
                self._ready(module, press)
                if press is not None:
                    keys, values = press.compress(module, hidden, keys, values, None, kwargs)
                cache.update(keys, values, module.layer_idx)
        return cache

    def scores_for(self, press: BasePress) -> list[torch.Tensor]:
        """Each layer's token scores (1, H_kv, L) from a ``ScorerPress``: what its ``compress`` ranks by."""
        press.post_init_from_model(self.model)
        with torch.no_grad():
            return [press.score(self._ready(module, press), hidden, keys, values, None, kwargs)
                    for module, hidden, keys, values, kwargs in self.layers]

    def _ready(self, module: Any, press: BasePress | None) -> Any:
        """Put ``module`` back in the state a press's hook sees during a real prefill."""
        module.masked_key_indices = None
        if press is not None:
            module.rotary_emb = self.model.model.rotary_emb
        return module

    @staticmethod
    def clear_masks(model: Any) -> None:
        for layer in model.model.layers:
            layer.self_attn.masked_key_indices = None


# ---------------------------------------------------------------------------------------- the runner
@dataclass
class _Job:
    cell: Cell
    fp: str
    done: dict[int, dict]


def _answer_shared(answerer: Answerer, shared: SharedPrefill, cell: Cell, question_ids: torch.Tensor,
                   max_new_tokens: int) -> str:
    press = make_press(cell.method, cell.ratio)
    cache = shared.cache_for(press)
    uneven = len({cache.get_seq_length(i) for i in range(len(cache))}) > 1  # e.g. a short last chunk kept
    pipe = answerer.pipe(REGISTRY[cell.method].needs_tokenwise_question and (uneven or _masks_heads(answerer.model)))
    try:
        with torch.no_grad():
            return pipe.generate_answer(question_ids, cache, shared.context_length, int(max_new_tokens))
    finally:
        SharedPrefill.clear_masks(answerer.model)


def _masks_heads(model: Any) -> bool:
    """True when a head-wise press left fake-key masks that need one query per forward on CPU."""
    return any(getattr(layer.self_attn, "masked_key_indices", None) is not None for layer in model.model.layers)


def run_grid(cells: list[Cell], out_dir: str | Path, progress: bool = True, device: str | None = None,
             dtype: str = "auto") -> pd.DataFrame:
    """Compute every unfinished cell (shared prefill per sample), write result files; returns the summary."""
    store = CellStore(out_dir)
    groups: dict[tuple, list[Cell]] = defaultdict(list)
    for cell in cells:
        groups[cell.group].append(cell)
    loaded: dict[str, tuple] = {}
    outer = tqdm(total=len(cells), desc="grid cells", disable=not progress)
    try:
        for (model_name, length, query_aware, samples, seed, source, tasks, max_new), members in groups.items():
            if model_name not in loaded:
                loaded.clear()
                loaded[model_name] = load_model(model_name, device=device, dtype=dtype)
            model, tokenizer = loaded[model_name]
            df = load(length, tokenizer, source=source, samples_per_task=samples, seed=seed, tasks=tasks)
            if max_new is not None:
                df = df.assign(max_new_tokens=max_new)
            dataset = {"source": df.attrs.get("source"), "substitutes": df.attrs.get("substitutes", {}),
                       "fingerprint": dataset_fingerprint(df), "rows": len(df)}
            jobs = []
            for cell in members:
                fp = fingerprint(cell, dataset["fingerprint"])
                state = store.status(cell, fp)
                if state == "done":
                    outer.update(1)
                    continue
                if state in ("corrupt", "stale"):
                    log.warning("cell %s: result file is %s; recomputing", cell.key, state)
                jobs.append(_Job(cell, fp, store.partial(cell, fp)))
            if jobs:
                _run_group(jobs, df, model, tokenizer, store, dataset, query_aware, length, progress, outer)
    except KeyboardInterrupt:
        outer.close()
        print("interrupted: finished cells are saved and partial answers kept; run the same command to resume")
        raise
    outer.close()
    return load_results(out_dir, cells)


def _run_group(jobs: list[_Job], df: pd.DataFrame, model: Any, tokenizer: Any, store: CellStore, dataset: dict,
               query_aware: bool, length: int, progress: bool, outer: tqdm) -> None:
    answerer = Answerer(model, tokenizer)
    plain = answerer.pipe(False)
    prefill_time: dict[str, float] = defaultdict(float)
    todo = [i for i in range(len(df)) if any(i not in job.done for job in jobs)]
    for i in tqdm(todo, desc=f"{length} tokens: samples", disable=not progress, leave=False):
        row = df.iloc[i]
        context, question = (row.context + row.question, "") if query_aware else (row.context, row.question)
        shared = None
        for job in jobs:
            if i in job.done:
                continue
            start = time.perf_counter()
            if REGISTRY[job.cell.method].needs_query_aware:  # Finch: its own prefill, through the pipeline
                answer = answerer.answer(job.cell.method, job.cell.ratio, row.context, row.question,
                                         row.answer_prefix, row.max_new_tokens)
            else:
                if shared is None:
                    ids = plain.preprocess(context, [question], row.answer_prefix, max_context_length=10**9)
                    shared = SharedPrefill(model, ids["context_ids"])
                    question_ids = ids["questions_ids"][0].to(model.device)
                    users = sum(1 for j in jobs if i not in j.done and not REGISTRY[j.cell.method].needs_query_aware)
                    for j in jobs:
                        if i not in j.done and not REGISTRY[j.cell.method].needs_query_aware:
                            prefill_time[j.cell.key] += shared.seconds / users
                answer = _answer_shared(answerer, shared, job.cell, question_ids, row.max_new_tokens)
            record = {"index": i, "predicted_answer": answer, "seconds": round(time.perf_counter() - start, 4)}
            store.append(job.cell, job.fp, record)
            job.done[i] = record
    for job in jobs:
        decode = sum(r["seconds"] for r in job.done.values())
        timings = {"decode_s": round(decode, 3), "shared_prefill_s": round(prefill_time[job.cell.key], 3),
                   "total_s": round(decode + prefill_time[job.cell.key], 3)}
        store.finish(job.cell, job.fp, df, job.done, dataset, timings)
        outer.update(1)


def load_results(out_dir: str | Path, cells: list[Cell] | None = None) -> pd.DataFrame:
    """One row per finished cell: its config, aggregate, per-task scores and timings (corrupt files skipped)."""
    rows = []
    wanted = {c.key for c in cells} if cells is not None else None
    for path in sorted(Path(out_dir).glob(f"*/{RESULT}")):
        if wanted is not None and path.parent.name not in wanted:
            continue
        try:
            result = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            log.warning("skipping unreadable result %s", path)
            continue
        rows.append({**result["config"], "aggregate": result["aggregate"],
                     **{f"task:{t}": v for t, v in result["scores"].items() if t != "aggregate"},
                     **result["timings"], "source": result["dataset"]["source"],
                     "embedded_model": result["embedded_model"], "cell": path.parent.name})
    return pd.DataFrame(rows)
