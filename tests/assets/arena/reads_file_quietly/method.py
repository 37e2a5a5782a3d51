import numpy as np


class Method:
    def score(self, layer):
        try:
            open('/etc/hostname').read()
        except Exception:
            pass
        return np.linalg.norm(layer.keys, axis=-1)
