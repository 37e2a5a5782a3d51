"""A search run's best policy program as an arena submission folder.

A policy program (``cachecraft_lib.methods.policy``: ``score_tokens(ctx)``, ``select_tokens_to_keep(scores, ctx)`` over
a ``FeatureContext``) cannot run in the arena's sandbox as it is: its features are built with torch outside it
and it imports ``cachecraft_lib.policy``'s helpers. ``program_to_submission`` writes a ``method.py`` that
rebuilds the same 17 features in numpy from the layer the arena passes (``METHOD_PREAMBLE``: the FRC
submission's tail attention, then ``features.token_features`` in numpy), defines numpy versions of the helpers
(``maxabs``, ``topk_tokens``, ``topk_chunks``), appends the program unchanged except for its helper import, and
returns its selection through ``keep``. One difference, stated in the written DESCRIPTION: ``topk_chunks``
keeps as many whole chunks as fit the arena's budget (the suite's rule may exceed it by part of a chunk).
"""

from __future__ import annotations

import re
from pathlib import Path

from .folder import DESCRIPTION_FILE, METADATA_FILE, METHOD_FILE, _check_import, load_submission

HELPER_IMPORT = re.compile(r"^\s*from\s+cachecraft_lib\.policy\s+import\s+[^\n]+$", re.M)
BEST_NAMES = ("best/best_program.py", "best_program.py")

METHOD_PREAMBLE = '''"""Converted from the policy program {origin} by cachecraft_lib.arena.convert (see its doc)."""

import math

import numpy as np

N_SINK, WINDOW, CHUNK = 4, 32, 20


class FeatureContext:
    """What a policy program sees: ``features`` (17 read-only arrays of length L) and its scalars."""

    def __init__(self, features, L, K, H, Q, layer, compression_ratio, chunk_length=CHUNK, window=WINDOW):
        self.features, self.L, self.K, self.H, self.Q = features, L, K, H, Q
        self.layer, self.compression_ratio = layer, compression_ratio
        self.chunk_length, self.window, self.extra = chunk_length, window, {{}}

    def __getattr__(self, name):
        features = self.__dict__.get("features", {{}})
        if name in features:
            return features[name]
        raise AttributeError(f"FeatureContext has no feature {{name!r}}; features: {{', '.join(features)}}")

    def __getitem__(self, name):
        return self.features[name]


def maxabs(x):
    arr = np.asarray(x, dtype=np.float32)
    peak = np.abs(arr).max() if arr.size else 0.0
    return arr / peak if peak > 0 else arr


def _chunk_means(scores, chunk_length):
    n = len(scores)
    n_chunks = -(-n // chunk_length)
    padded = np.zeros(n_chunks * chunk_length, dtype=np.float32)
    padded[:n] = scores
    means = padded.reshape(n_chunks, chunk_length).sum(axis=1) / chunk_length
    rest = n - (n_chunks - 1) * chunk_length
    if rest != chunk_length:
        means[-1] *= chunk_length / rest
    return means


def topk_tokens(scores, ctx):
    scores = np.asarray(scores, dtype=np.float32)
    return np.sort(np.argsort(-scores, kind="stable")[: ctx.K])


def topk_chunks(scores, ctx, chunk_length=None):
    """Whole chunks with the best mean score, as many as fit the budget ctx.K (at least one, cut to ctx.K)."""
    size = chunk_length or ctx.chunk_length
    means = _chunk_means(np.asarray(scores, dtype=np.float32), size)
    order = np.argsort(-means, kind="stable")
    kept, idx = 0, []
    for c in order:
        span = np.arange(c * size, min((c + 1) * size, ctx.L))
        if idx and kept + len(span) > ctx.K:
            continue
        idx.append(span)
        kept += len(span)
    return np.sort(np.concatenate(idx))[: ctx.K]


def _tail_attention(queries, keys):
    n_kv, length, dim = keys.shape
    n_q = queries.shape[1]
    q = queries.reshape(n_kv, -1, dim) / math.sqrt(dim)
    logits = (q @ keys.transpose(0, 2, 1)).reshape(n_kv, -1, n_q, length)
    logits[..., length - n_q:] = np.where(np.triu(np.ones((n_q, n_q), dtype=bool), k=1), -np.inf,
                                          logits[..., length - n_q:])
    attn = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return (attn / attn.sum(axis=-1, keepdims=True)).mean(axis=1)


def _features(attn, keys, values, k_budget, window=WINDOW, chunk_length=CHUNK):
    n_kv, _, length = attn.shape
    per_head = attn.mean(axis=1)
    abar = per_head.mean(axis=0)
    in_top = np.zeros_like(per_head)
    top = np.argsort(-per_head, axis=-1, kind="stable")[:, : min(k_budget, length)]
    np.put_along_axis(in_top, top, 1.0, axis=-1)
    change = np.zeros(length, dtype=np.float32)
    if length > 1:
        change[1:] = np.linalg.norm(keys[:, 1:] - keys[:, :-1], axis=-1).mean(axis=0)
    c_scores = _chunk_means(abar, chunk_length)
    chunk_of = np.arange(length) // chunk_length
    order = np.argsort(np.argsort(c_scores, kind="stable"), kind="stable").astype(np.float32)
    pos = np.arange(length, dtype=np.float32)
    wd = max(3, min(33, 2 * (length // 64) + 1))
    feats = {{
        "local_attn": attn[:, -window:, :].mean(axis=(0, 1)), "global_attn": abar,
        "density": np.convolve(abar, np.ones(wd), mode="same") / wd, "max_head": per_head.max(axis=0),
        "head_consistency": in_top.mean(axis=0),
        "head_concentration": per_head.max(axis=0) / np.maximum(per_head.sum(axis=0), 1e-30),
        "last_query_attn": attn[:, -1, :].mean(axis=0), "query_variance": attn.mean(axis=0).var(axis=0),
        "key_norm": np.linalg.norm(keys, axis=-1).mean(axis=0), "key_change": change,
        "value_norm": np.linalg.norm(values, axis=-1).mean(axis=0), "chunk_mean": c_scores[chunk_of],
        "chunk_rank": (order / max(len(c_scores) - 1, 1))[chunk_of], "position": pos,
        "rel_position": pos / max(length - 1, 1), "sink_mask": (pos < N_SINK).astype(np.float32),
        "recent_mask": (pos >= length - window).astype(np.float32),
    }}
    out = {{}}
    for name, arr in feats.items():
        arr = np.array(arr, dtype=np.float32)
        arr.setflags(write=False)
        out[name] = arr
    return out


# ------------------------------------------------------------------------------- the policy program
'''

METHOD_CLASS = '''

# ------------------------------------------------------------------------------- the arena's interface
class Method:
    """The policy program on the arena's layer: features rebuilt in numpy, its selection kept for every head."""

    def keep(self, layer):
        keys, values = layer.keys.astype(np.float32), layer.values.astype(np.float32)
        attn = _tail_attention(layer.queries.astype(np.float32), keys)
        return self.keep_features(_features(attn, keys, values, layer.budget), layer.n_tokens, layer.budget,
                                  attn.shape[0], attn.shape[1], layer.layer, layer.compression_ratio)

    def keep_features(self, features, L, K, H, Q, layer, compression_ratio):
        """The selection from the 17 features (the search's population path builds them once outside, with
        this file's own ``_features``, and sends them for every candidate)."""
        ctx = FeatureContext(features, L, K, H, Q, layer, compression_ratio)
        kept = np.asarray(select_tokens_to_keep(score_tokens(ctx), ctx))
        return kept.astype(np.int64)
'''

DESCRIPTION = """# {name}

## Idea
A KV-eviction policy program found by CacheCraft's LLM-guided search (OpenEvolve), submitted as it was evolved.
{doc}

## Method
The program's `score_tokens` and `select_tokens_to_keep` over CacheCraft's 17 per-token features (tail
attention of the last 64 queries, densities, head statistics, key/value norms, positions), rebuilt in numpy
inside the sandbox; its selection is kept for every KV head of a layer.

## Relation to prior work
The features include SnapKV's window attention and H2O-like accumulated attention; the program combines them
as the search found. Compare with FRC (cachecraft_lib/arena/examples/frc), the paper's policy.

## Evidence
The search's own evaluation on its training samples ({origin}); the arena's dev board measures it on held-out
items with a paired interval.

## Limitations
Whole-chunk selection keeps as many chunks as fit the arena's budget (the suite's rule may exceed it by part
of a chunk). Selected on the search's samples: its dev and test scores are the held-out check.

## Builds on
CacheCraft's policy interface (cachecraft_lib/methods/policy.py) and feature builder (cachecraft_lib/methods/features.py).
"""


def find_program(path: str | Path) -> Path:
    """The program file: ``path`` itself, or a search run's best program inside it."""
    path = Path(path)
    if path.is_file():
        return path
    for name in BEST_NAMES:
        if (path / name).is_file():
            return path / name
    found = sorted(path.glob("**/best/best_program.py"))
    if not found:
        raise FileNotFoundError(f"no policy program at {path}: pass a .py file or a search run folder with "
                                "best/best_program.py (written by `cachecraft evolve`)")
    return found[-1]


def program_to_submission(program: str | Path, out_dir: str | Path, name: str, author: str = "cachecraft-search",
                          boards: tuple[str, ...] | None = None):
    """Write the submission folder of ``program`` (a file or a search run) into ``out_dir``; returns it checked.
    ``boards`` defaults to every board that evicts at prefill (a policy program's hook), from the board files."""
    if boards is None:
        from ..boards.boards import board_names
        boards = board_names(prefill_only=True)
    src_path = find_program(program)
    source = HELPER_IMPORT.sub("", src_path.read_text(encoding="utf-8"))
    for module in re.findall(r"^\s*(?:from\s+(\S+)\s+import|import\s+(\S+))", source, re.M):
        _check_import(next(m for m in module if m))
    if not re.search(r"^def score_tokens\(", source, re.M) or not re.search(r"^def select_tokens_to_keep\(",
                                                                             source, re.M):
        raise ValueError(f"{src_path} is not a policy program: it needs score_tokens(ctx) and "
                         "select_tokens_to_keep(scores, ctx)")
    source = source.replace("from __future__ import annotations\n", "")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    doc = re.match(r'\s*(?:"""|\'\'\')(.*?)(?:"""|\'\'\')', source, re.S)
    (out / METHOD_FILE).write_text(METHOD_PREAMBLE.format(origin=src_path.name) + source + METHOD_CLASS)
    (out / DESCRIPTION_FILE).write_text(DESCRIPTION.format(name=name, origin=src_path,
                                                           doc=doc.group(1).strip() if doc else ""))
    (out / METADATA_FILE).write_text(f"name: {name}\nauthor: {author}\nboards: [{', '.join(boards)}]\n")
    return load_submission(out)
