import numpy as np


class Method:
    def score(self, layer):
        return np.full(layer.n_tokens, np.nan)
