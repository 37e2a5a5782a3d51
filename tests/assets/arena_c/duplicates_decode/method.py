import numpy as np


class Method:
    def decode(self, layer):
        return np.zeros(layer.budget, dtype=np.int64)
