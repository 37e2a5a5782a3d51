import numpy as np


class Method:
    """StreamingLLM written as indices: 4 sinks and the newest entries, exactly the budget."""

    def decode(self, layer):
        n, budget = layer.n_tokens, layer.budget
        return np.concatenate([np.arange(4), np.arange(n - (budget - 4), n)]).astype(np.int64)
