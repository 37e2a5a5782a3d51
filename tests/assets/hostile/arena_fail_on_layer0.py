import numpy as np


class Method:
    def score(self, layer):
        if layer.layer == 0:
            raise RuntimeError("fails on layer 0 only")
        return np.linalg.norm(layer.keys, axis=-1)
