"""kvprior (the arena post's board C method): when the cap overflows, keep the entries a ridge regression predicts
will be attended over the rest of the trace, from features RoPE leaves unchanged (the value and the key's
rotated-pair norms); the newest entries are kept regardless. The weights come from fit.py, on dev traces only."""

import numpy as np

RECENT = 0.25  # share of the budget kept for the newest entries: the next tokens read them locally


def features(keys, values):
    """(H, L, D + D/2): the value vector and the norm of each pair of key dimensions RoPE rotates together."""
    half = keys.shape[-1] // 2
    pairs = np.sqrt(keys[..., :half] ** 2 + keys[..., half:] ** 2)
    return np.concatenate([values, pairs], axis=-1)


class Method:
    def __init__(self, params):
        self.w, self.b, self.mu, self.sd = params["w"], params["b"], params["mu"], params["sd"]

    def decode(self, layer):
        """Predicted log long-horizon attention per KV head; the newest RECENT share of the budget on top."""
        i = layer.layer
        z = (features(layer.keys, layer.values) - self.mu[i][:, None, :]) / self.sd[i][:, None, :]
        prior = np.einsum("hlf,hf->hl", z, self.w[i]) + self.b[i][:, None]
        recent = max(1, int(RECENT * layer.budget))
        positions = np.broadcast_to(layer.positions, prior.shape)  # (H_kv, L) at decode time
        newest = np.argsort(positions, axis=1)[:, -recent:]
        top = prior.max() - prior.min() + 1.0
        np.put_along_axis(prior, newest, np.take_along_axis(prior, newest, axis=1) + top, axis=1)
        return prior.astype(np.float32)
