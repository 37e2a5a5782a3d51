"""StreamingLLM (Xiao et al., 2024) through the arena interface: the first tokens (sinks) and the newest ones."""

import numpy as np

SINKS = 4  # KVPress's n_sink


class Method:
    def score(self, layer):
        """1 for the sinks and the newest budget - SINKS entries, 0 for the middle the budget cannot hold."""
        n = layer.n_tokens
        pruned = n - layer.budget
        scores = np.ones((layer.n_kv_heads, n), dtype=np.float32)
        scores[:, SINKS : SINKS + pruned] = 0
        return scores
