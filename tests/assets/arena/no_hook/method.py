import numpy as np


class Method:
    def other(self, layer):
        return np.linalg.norm(layer.keys, axis=-1)
