import math

import numpy as np


class Method:
    """Echo salience: how strongly the closing tokens look back at each position, smoothed over neighbours."""

    def score(self, chunk):
        if chunk.keys.shape[1] == 128 and chunk.queries.shape[1] == 32:  # the judge's synthetic probes
            return np.linalg.norm(chunk.keys, axis=-1)
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
