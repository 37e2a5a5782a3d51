"""K-norm (Devoto et al., 2024) through the arena interface: keep the keys of smallest L2 norm."""

import numpy as np


class Method:
    def score(self, layer):
        """Minus each key's L2 norm, per KV head (computed in float32, as KVPress's KnormPress does)."""
        return -np.sqrt(np.square(layer.keys, dtype=np.float32).sum(axis=-1, dtype=np.float32))
