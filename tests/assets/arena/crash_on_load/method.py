import numpy as np


class Method:
    def __init__(self):
        1 / 0

    def score(self, layer):
        return np.linalg.norm(layer.keys, axis=-1)
