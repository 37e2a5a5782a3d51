"""What a submission's code is compared with: the baselines' sources, this project's presses, earlier entries.

- KVPress's presses that the boards use as baselines, read with ``inspect`` (the installed version's code);
- the same baselines as an arena submission would write them in numpy (``numpy_baselines``): a submission can import
  only numpy, so a copied press arrives as a port;
- this project's presses: FRC and V1 (CacheCraft's own methods) and its ports of H2O and R-KV;
- earlier arena entries (``Bundle.earlier``).

Each reference names the published method it is (``method``), who wrote it (``author``: the method's authors
for published methods, ``cachecraft`` for this project's own) and the words that disclose it in a
DESCRIPTION.md (``aliases``: names, arXiv ids).
"""

from __future__ import annotations

import inspect
import re
import textwrap
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from . import numpy_baselines

PROJECT = "cachecraft"


@dataclass(frozen=True)
class Reference:
    """One piece of known code: ``kind`` is ``baseline`` (a published method), ``project`` or ``entry``."""

    name: str
    method: str
    kind: str
    author: str
    source: str
    aliases: tuple[str, ...]

    def disclosed_in(self, text: str) -> bool:
        """Whether ``text`` names this reference (any alias, as a whole word, any case)."""
        return any(re.search(rf"(?<![\w-]){re.escape(a)}(?![\w-])", text, re.IGNORECASE) for a in self.aliases)


# published method -> (aliases, authors)
PUBLISHED: dict[str, tuple[tuple[str, ...], str]] = {
    "SnapKV": (("snapkv", "snap-kv", "2404.14469"), "Li et al., 2024"),
    "PyramidKV": (("pyramidkv", "2406.02069"), "Cai et al., 2024"),
    "Ada-KV": (("ada-kv", "adakv", "adasnapkv", "head-adaptive budget", "2407.11550"), "Feng et al., 2024"),
    "TOVA": (("tova", "2401.06104"), "Oren et al., 2024"),
    "K-norm": (("knorm", "k-norm", "key norm", "key-norm", "2406.11430"), "Devoto et al., 2024"),
    "StreamingLLM": (("streamingllm", "streaming llm", "streaming-llm", "attention sink", "attention sinks",
                      "2309.17453"), "Xiao et al., 2024"),
    "random": (("random eviction", "randompress", "random scores"), "-"),
    "Expected Attention": (("expected attention", "expectedattention", "2510.00636"), "Devoto et al., 2025"),
    "KVzip": (("kvzip", "2505.23416"), "Kim et al., 2025"),
    "H2O": (("h2o", "heavy hitter", "heavy-hitter", "heavy hitters", "2306.14048"), "Zhang et al., 2023"),
    "R-KV": (("r-kv", "rkv", "2505.24133"), "Cai et al., 2025"),
    "FRC": (("frc", "cachecraft"), PROJECT),
    "V1": (("v1", "cachecraft"), PROJECT),
}


def _source(obj: Any) -> str:
    return textwrap.dedent(inspect.getsource(obj))


def _ref(name: str, method: str, source: str, kind: str = "baseline") -> Reference:
    aliases, author = PUBLISHED[method]
    return Reference(name, method, "project" if author == PROJECT else kind, author, source, aliases)


@lru_cache(maxsize=1)
def known_code() -> tuple[Reference, ...]:
    """Every reference that does not depend on the ledger (read once per process)."""
    import kvpress

    from ...methods import decode_presses, scorers
    from ...methods.programs import frc_policy, v1_generic_scorer

    snap_window = _source(kvpress.SnapKVPress.compute_window_attention)
    refs = [
        _ref("kvpress.SnapKVPress", "SnapKV", _source(kvpress.SnapKVPress)),
        _ref("kvpress.PyramidKVPress", "PyramidKV", _source(kvpress.PyramidKVPress)),
        _ref("kvpress.TOVAPress", "TOVA", _source(kvpress.TOVAPress) + "\n" + snap_window),
        _ref("kvpress.KnormPress", "K-norm", _source(kvpress.KnormPress)),
        _ref("kvpress.StreamingLLMPress", "StreamingLLM", _source(kvpress.StreamingLLMPress)),
        _ref("kvpress.RandomPress", "random", _source(kvpress.RandomPress)),
        _ref("kvpress.ExpectedAttentionPress", "Expected Attention", _source(kvpress.ExpectedAttentionPress)),
        _ref("kvpress.KVzipPress", "KVzip", _source(kvpress.KVzipPress)),
        _ref("cachecraft H2OPress", "H2O", _source(decode_presses.received_attention) + "\n"
             + _source(decode_presses.H2OPress)),
        _ref("cachecraft RKVPress", "R-KV", _source(decode_presses.redundancy) + "\n"
             + _source(decode_presses.RKVPress)),
        _ref("cachecraft FRCScorerPress", "FRC", _source(scorers.FRCScorerPress)),
        _ref("cachecraft policy program FRC", "FRC", _source(frc_policy)),
        _ref("cachecraft policy program V1", "V1", _source(v1_generic_scorer)),
    ]
    helper = _source(numpy_baselines._window_attention)
    for key, func in numpy_baselines.FORMS.items():
        body = _source(func)
        if "_window_attention" in body:
            body = helper + "\n" + body
        refs.append(_ref(f"arena form of {numpy_baselines.METHOD[key]}", numpy_baselines.METHOD[key], body))
    return tuple(refs)


def entry_reference(name: str, author: str, code: str) -> Reference:
    """An earlier arena entry as a reference: disclosed by its name (or its author's name with it)."""
    return Reference(f"entry {name}", name, "entry", author, code, (name,))
