import numpy as np


class Method:
    def keep(self, layer):
        return np.zeros(layer.budget, dtype=np.int64)
