import numpy as np


class Method:
    def score(self, layer):
        __import__('os').listdir('/')
        return np.linalg.norm(layer.keys, axis=-1)
