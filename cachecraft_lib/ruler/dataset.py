"""Generate RULER in KVPress's schema, cache it under ``data/ruler/``, or load the real one from the hub."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from ..util.atomic import atomic_write
from ..util.progress import tqdm
from .tasks import GENERATORS, SUBSTITUTES, TaskState
from .templates import MAX_NEW_TOKENS, TASKS, split_context_question, task_family
from .tokens import TokenCounter, as_counter

log = logging.getLogger(__name__)

GENERATOR_VERSION = "1"  # bump when generated text changes, so caches are rebuilt
COLUMNS = ["context", "question", "answer_prefix", "answer", "task", "max_new_tokens"]
HF_DATASET = "simonjegou/ruler"
FILL_TARGET = 0.95  # a generated sample uses at least this share of the token budget when it can
DEFAULT_CACHE = Path(__file__).resolve().parents[2] / "data" / "ruler"


def _tokens_of(text: str, max_new_tokens: int, count: TokenCounter) -> int:
    return count(text) + max_new_tokens


def fit_haystack(task: str, length: int, count: TokenCounter, seed: int) -> int:
    """The largest haystack size whose sample fits ``length`` tokens (RULER's sizing on one sample).

    Exponential then binary search over the unit count, each probe built from the same RNG state.
    """
    spec = GENERATORS[task]
    mnt = MAX_NEW_TOKENS[task_family(task)]

    def fits(n: int) -> bool:
        text, _ = spec.build(n, random.Random(seed), TaskState(length, seed))
        return _tokens_of(text, mnt, count) <= length

    lo, hi = 1, max(spec.step(length), 2)
    if not fits(lo):
        raise ValueError(f"{task}: even a minimal haystack exceeds {length} tokens; use a longer length")
    while fits(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def _task_rows(task: str, length: int, count: TokenCounter, samples: int, seed: int) -> list[dict]:
    spec = GENERATORS[task]
    mnt = MAX_NEW_TOKENS[task_family(task)]
    n_fit = fit_haystack(task, length, count, seed)
    state = TaskState(length, seed)
    rng = random.Random(seed)
    shrink = max(1, min(spec.step(length), n_fit // 50))
    rows = []
    for _ in range(samples):
        start = rng.getstate()
        n = n_fit
        text, answers = spec.build(n, rng, state)
        used = _tokens_of(text, mnt, count)
        while used > length and n > shrink:  # per-sample fallback, as RULER does, by a small step
            n -= shrink
            rng.setstate(start)
            text, answers = spec.build(n, rng, state)
            used = _tokens_of(text, mnt, count)
        while used < FILL_TARGET * length:  # a sample that tokenizes short grows back towards the budget
            after = rng.getstate()
            rng.setstate(start)
            bigger = spec.build(n + shrink, rng, state)
            if _tokens_of(bigger[0], mnt, count) > length:
                rng.setstate(after)
                break
            n += shrink
            text, answers = bigger
            used = _tokens_of(text, mnt, count)
        context, question, prefix = split_context_question(text, task)
        rows.append({"context": context, "question": question, "answer_prefix": prefix,
                     "answer": list(answers), "task": task, "max_new_tokens": mnt})
    return rows


def generate(length: int, tokenizer: Any, samples_per_task: int = 500, seed: int = 42,
             tasks: Iterable[str] | None = None, progress: bool = False) -> pd.DataFrame:
    """RULER at ``length`` tokens for ``tokenizer``, in KVPress's schema (one row per sample).

    ``df.attrs`` records ``source`` ("offline"), ``substitutes`` (task -> what replaced the
    original data), the tokenizer fingerprint, length, seed and generator version.
    Each task draws from its own ``random.Random(seed)``, so a subset gives the same rows as the full set.
    """
    tasks = list(TASKS if tasks is None else tasks)
    unknown = [t for t in tasks if t not in GENERATORS]
    if unknown:
        raise ValueError(f"unknown RULER task(s) {unknown}; choose from {list(TASKS)}")
    count = as_counter(tokenizer)
    rows: list[dict] = []
    for task in tqdm(tasks, desc=f"RULER {length}", disable=not progress):
        rows += _task_rows(task, length, count, samples_per_task, seed)
    df = pd.DataFrame(rows, columns=COLUMNS)
    df.attrs.update(source="offline", substitutes={t: SUBSTITUTES[t] for t in tasks if t in SUBSTITUTES},
                    tokenizer=count.name, tokenizer_fingerprint=count.fingerprint, length=length, seed=seed,
                    samples_per_task=samples_per_task, generator_version=GENERATOR_VERSION)
    return df


# -------------------------------------------------------------------------------- caching / load
def _manifest_for(length: int, count: TokenCounter, samples: int, seed: int, tasks: list[str]) -> dict:
    return {"source": "offline", "tokenizer": count.name, "tokenizer_fingerprint": count.fingerprint,
            "length": length, "seed": seed, "samples_per_task": samples, "tasks": tasks,
            "generator_version": GENERATOR_VERSION}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _cache_paths(cache_dir: Path, manifest: dict) -> tuple[Path, Path]:
    key = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:12]
    stem = f"ruler_{manifest['length']}_{manifest['tokenizer_fingerprint']}_{key}"
    return cache_dir / f"{stem}.parquet", cache_dir / f"{stem}.json"


def _read_cache(data_path: Path, meta_path: Path, manifest: dict) -> pd.DataFrame | None:
    """The cached table if its manifest matches the request and its checksum holds; else None (with why)."""
    if not data_path.exists() or not meta_path.exists():
        return None
    try:
        meta = json.loads(meta_path.read_text())
        stored = {k: meta.get(k) for k in manifest}
        if stored != manifest:
            log.warning("RULER cache %s was made for %s, not %s: rebuilding", data_path.name, stored, manifest)
            return None
        if meta.get("sha256") != _sha256(data_path):
            log.warning("RULER cache %s fails its checksum (corrupt or edited): rebuilding", data_path.name)
            return None
        df = pd.read_parquet(data_path)
    except Exception as err:  # unreadable json/parquet: rebuild, never reuse
        log.warning("RULER cache %s is unreadable (%s): rebuilding", data_path.name, err)
        return None
    if list(df.columns) != COLUMNS or len(df) != manifest["samples_per_task"] * len(manifest["tasks"]):
        log.warning("RULER cache %s has the wrong shape: rebuilding", data_path.name)
        return None
    df["answer"] = df["answer"].map(list)
    df.attrs.update({k: v for k, v in meta.items() if k != "sha256"})
    return df


def load_offline(length: int, tokenizer: Any, samples_per_task: int = 500, seed: int = 42,
                 tasks: Iterable[str] | None = None, cache_dir: str | Path | None = None,
                 progress: bool = False) -> pd.DataFrame:
    """Generated RULER, cached under ``data/ruler/`` with a manifest; a stale or corrupt cache is rebuilt."""
    count = as_counter(tokenizer)
    tasks = list(TASKS if tasks is None else tasks)
    manifest = _manifest_for(length, count, samples_per_task, seed, tasks)
    data_path, meta_path = _cache_paths(Path(cache_dir or DEFAULT_CACHE), manifest)
    cached = _read_cache(data_path, meta_path, manifest)
    if cached is not None:
        return cached
    df = generate(length, count, samples_per_task, seed, tasks, progress=progress)
    atomic_write(data_path, lambda tmp: df.to_parquet(tmp, index=False))
    meta = {**manifest, "substitutes": df.attrs["substitutes"], "sha256": _sha256(data_path)}
    atomic_write(meta_path, lambda tmp: Path(tmp).write_text(json.dumps(meta, indent=2)))
    return df


def hub_reachable(timeout: float = 3.0) -> bool:
    """A quick check before asking ``datasets`` (whose retries take half a minute and flood the log).

    One HEAD request through huggingface_hub's own HTTP client, so it goes wherever the hub's downloads go:
    through ``HTTPS_PROXY``/``ALL_PROXY``, with the user's ``HF_ENDPOINT`` and client factory. (A raw socket to
    the hub would report "unreachable" behind a proxy and force offline mode.) Any HTTP answer below 500
    counts as reachable; no answer in ``timeout`` seconds, a refused proxy or a server error does not.
    """
    from huggingface_hub import constants
    from huggingface_hub.utils import get_session

    if constants.HF_HUB_OFFLINE or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        return False
    try:
        response = get_session().head(constants.ENDPOINT, timeout=timeout, follow_redirects=False)
    except Exception as err:  # httpx's transport and proxy errors, OSError, a user factory's own errors
        log.debug("hub probe of %s failed: %s: %s", constants.ENDPOINT, type(err).__name__, err)
        return False
    return response.status_code < 500


def load_hf(length: int) -> pd.DataFrame:
    """KVPress's ``simonjegou/ruler`` (data_dir = str(length), split test), as KVPress's evaluate.py loads it."""
    from datasets import load_dataset

    df = load_dataset(HF_DATASET, data_dir=str(length), split="test").to_pandas()
    df["answer"] = df["answer"].map(list)
    df.attrs.update(source="hf", substitutes={}, length=length, dataset=HF_DATASET)
    return df


def load(length: int, tokenizer: Any, source: str = "auto", samples_per_task: int | None = None,
         seed: int = 42, tasks: Iterable[str] | None = None, cache_dir: str | Path | None = None,
         progress: bool = False) -> pd.DataFrame:
    """RULER rows at ``length``: ``hf`` (the hub), ``offline`` (generated, cached) or ``auto`` (hub, else offline).

    ``samples_per_task`` keeps the first N rows of each task (hub) or generates N (offline);
    None means the full 500.
    """
    if source not in {"auto", "hf", "offline"}:
        raise ValueError(f"source must be 'auto', 'hf' or 'offline', not {source!r}")
    wanted = list(TASKS if tasks is None else tasks)
    if source == "auto" and not hub_reachable():
        log.warning("RULER: the Hugging Face hub is unreachable; using the offline generator (labelled 'offline')")
        source = "offline"
    if source in {"auto", "hf"}:
        try:
            df = load_hf(length)
        except Exception as err:
            if source == "hf":
                raise RuntimeError(f"could not load {HF_DATASET} ({length}) from the hub: {err}. "
                                   f"Use source='offline' to generate RULER locally.") from err
            log.warning("RULER: %s unreachable (%s); using the offline generator (labelled 'offline')",
                        HF_DATASET, type(err).__name__)
        else:
            df = df[df["task"].isin(wanted)]
            if samples_per_task is not None:
                df = df.groupby("task", sort=False).head(samples_per_task)
            out = df.reset_index(drop=True)
            out.attrs.update(source="hf", substitutes={}, length=length, dataset=HF_DATASET)
            return out
    return load_offline(length, tokenizer, samples_per_task or 500, seed, wanted, cache_dir, progress)
