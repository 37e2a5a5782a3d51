import numpy as np


class Method:
    def score(self, layer):
        layer.keys.setflags(write=True)
        return np.linalg.norm(layer.keys, axis=-1)
