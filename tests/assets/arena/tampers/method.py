import numpy as np


class Method:
    def score(self, layer):
        layer.keys[0, 0, 0] = 1.0
        return np.linalg.norm(layer.keys, axis=-1)
