import numpy as np


class Method:
    def score(self, layer):
        return np.ones(layer.n_tokens + 1)
