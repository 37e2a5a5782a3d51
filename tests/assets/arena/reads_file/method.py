import numpy as np


class Method:
    def score(self, layer):
        open('/etc/hostname').read()
        return np.linalg.norm(layer.keys, axis=-1)
