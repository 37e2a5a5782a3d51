import numpy as np


class Method:
    def score(self, layer):
        if layer.layer == 0:
            raise RuntimeError("fails on layer 0 only")
        return np.linalg.norm(layer.keys, axis=-1)

    def whole_cache(self, layers):  # the whole-cache hook's path (MethodSandbox.call_whole): a cache of one layer
        if len(layers) == 1:  # fails as layer 0 does above
            raise RuntimeError("fails on layer 0 only")
        return [np.linalg.norm(layer.keys, axis=-1) for layer in layers]
