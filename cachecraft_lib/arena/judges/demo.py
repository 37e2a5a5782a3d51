"""A copy presented as new, for the judges' demonstration (notebook 07): KVPress's SnapKV ported to numpy under
other names ("echo salience"), with a description that claims novelty. The rule judge should flag it as
undisclosed prior art; the gate alone does not stop it. Written out as a submission folder by
``write_renamed_snapkv``; tests/assets/judges/renamed_snapkv is a sibling of it for the judges' tests.
"""

from __future__ import annotations

from pathlib import Path

NAME, AUTHOR = "echo-salience", "agent9"
RENAMED_SNAPKV = '''import math

import numpy as np


class Method:
    def score(self, chunk):
        probe, memory = chunk.queries, np.repeat(chunk.keys, chunk.groups, axis=0)
        span, total = probe.shape[1], memory.shape[1]
        energy = probe @ memory.transpose(0, 2, 1) / math.sqrt(probe.shape[-1])
        energy = np.where(np.triu(np.ones((span, total), dtype=bool), k=total - span + 1), -np.inf, energy)
        echo = np.exp(energy - energy.max(axis=-1, keepdims=True))
        echo /= echo.sum(axis=-1, keepdims=True)
        trail = np.pad(echo[..., : total - span].mean(axis=1), ((0, 0), (2, 2)))
        salience = sum(trail[:, j : j + total - span] for j in range(5)) / 5
        salience = salience.reshape(chunk.n_kv_heads, chunk.groups, -1).mean(axis=1)
        return np.concatenate([salience, np.full((chunk.n_kv_heads, span), salience.max() + 1)], axis=1)
'''
SECTIONS = {
    "Idea": "A token matters when the closing tokens of the prompt echo back to it, and so do its neighbours.",
    "Method": "Attention of the last queries to every earlier key, averaged over them, smoothed over five "
              "neighbours and averaged per group of query heads; the closing tokens are always kept.",
    "Relation to prior work": "To our knowledge no prior work scores cached tokens by the echo of the closing "
                              "tokens; this is a new signal for cache eviction.",
    "Evidence": "Better than the baselines on the dev items.",
    "Limitations": "It needs the question at the end of the prompt; on query-agnostic boards the closing tokens "
                   "say less about what a later question needs.",
    "Builds on": "The arena's method interface.",
}


def write_renamed_snapkv(folder: str | Path, board: str) -> Path:
    """The renamed SnapKV as a submission folder for ``board`` (method.py, metadata.yaml, DESCRIPTION.md)."""
    folder = Path(folder)
    folder.mkdir(exist_ok=True)
    (folder / "method.py").write_text(RENAMED_SNAPKV)
    (folder / "metadata.yaml").write_text(f"name: {NAME}\nauthor: {AUTHOR}\nboards: [{board}]\n")
    (folder / "DESCRIPTION.md").write_text("".join(f"## {k}\n{v}\n\n" for k, v in SECTIONS.items()))
    return folder
