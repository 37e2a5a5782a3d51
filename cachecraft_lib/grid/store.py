"""The grid's result store: one folder per cell with ``result.json`` (atomic), partial answers while a cell is
in progress, KVPress's own layout (``predictions.csv``, ``metrics.json``, ``config.yaml``), fingerprints
that tell a finished cell from a stale or corrupt one, and ``failed.json`` when a cell's own press raised
(the reason; its answers so far stay in ``partial.jsonl``, and the next run tries the cell again).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path

import pandas as pd
import torch
import yaml

from .. import __version__
from ..methods.registry import REGISTRY, make_press
from ..models.loading import is_embedded
from ..ruler import GENERATOR_VERSION, score
from ..util.atomic import atomic_write_text
from .cells import Cell

log = logging.getLogger(__name__)
RESULT = "result.json"
PARTIAL = "partial.jsonl"
FAILED = "failed.json"
ENGINE_VERSION = "1"

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
        """One answer more; a line torn by a killed writer is closed first so that it costs only itself."""
        path = self.folder(cell) / PARTIAL
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab+") as f:
            line = json.dumps({**record, "fingerprint": fp}) + "\n"
            f.write((("\n" if _torn(f) else "") + line).encode())

    def fail(self, cell: Cell, fp: str, reason: str, sample: int | None, detail: str = "") -> None:
        """Record why a cell stopped (its press raised); the rest of its group goes on without it."""
        atomic_write_text(self.folder(cell) / FAILED, json.dumps(
            {"fingerprint": fp, "reason": reason, "sample": sample, "traceback": detail,
             "created": time.strftime("%Y-%m-%dT%H:%M:%S")}, indent=1))

    def failure(self, cell: Cell) -> dict | None:
        """The last recorded failure of an unfinished cell, or None."""
        path = self.folder(cell) / FAILED
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            return {"reason": "failed.json is unreadable", "sample": None}

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
        (folder / FAILED).unlink(missing_ok=True)
        return result


def _torn(f) -> bool:
    """Whether an open binary file's last line lacks its newline."""
    end = f.seek(0, 2)
    if end == 0:
        return False
    f.seek(end - 1)
    return f.read(1) != b"\n"


def _versions() -> dict[str, str]:
    import kvpress
    import transformers

    return {"cachecraft_lib": __version__, "kvpress": getattr(kvpress, "__version__", "0.5.5"),
            "transformers": transformers.__version__, "torch": torch.__version__}


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


def load_failures(out_dir: str | Path, cells: list[Cell]) -> dict[str, str]:
    """``{cell key: reason}`` for every cell of ``cells`` that is unfinished because its press raised."""
    store = CellStore(out_dir)
    failed = {}
    for cell in cells:
        record = store.failure(cell)
        if record is not None:
            at = f" (sample {record['sample']})" if record.get("sample") is not None else ""
            failed[cell.key] = f"{record['reason']}{at}"
    return failed
