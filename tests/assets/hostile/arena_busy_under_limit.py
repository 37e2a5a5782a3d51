import time

import numpy as np


class Method:
    def score(self, layer):
        end = time.process_time() + __SECONDS__  # just under the per-call CPU limit, on every call
        while time.process_time() < end:
            pass
        return np.linalg.norm(layer.keys, axis=-1)
