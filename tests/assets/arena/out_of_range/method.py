import numpy as np


class Method:
    def keep(self, layer):
        return np.arange(layer.budget) + layer.n_tokens
