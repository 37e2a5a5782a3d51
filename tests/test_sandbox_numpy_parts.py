"""A method may use every part of numpy, not only the parts loaded by the harness's warm-up: numpy 2 imports
``numpy.fft`` and ``numpy.random`` on first use, and inside the boundary that file open is refused by the audit
hook, so a method calling them failed as "file_access" although it broke no rule."""

from __future__ import annotations

import numpy as np
from sandbox_helpers import SCALARS, layer_arrays, submission

from cachecraft_lib.arena.submissions.sandbox import MethodSandbox
from cachecraft_lib.sandbox import Limits

SOURCE = '''
import numpy as np


class Method:
    def score(self, layer):
        spectrum = np.abs(np.fft.rfft(layer.keys, axis=-1)).sum(axis=-1)  # numpy.fft, loaded lazily
        noise = np.random.default_rng(0).random(spectrum.shape) * 1e-6  # numpy.random, loaded lazily
        return spectrum + noise
'''


def test_a_method_may_use_numpy_fft_and_random(tmp_path):
    arrays = layer_arrays()
    with MethodSandbox(submission(tmp_path, SOURCE), Limits(timeout_s=5.0, memory_mb=256)) as box:
        scores = box.call(arrays, **SCALARS)
    expected = np.abs(np.fft.rfft(arrays["keys"], axis=-1)).sum(axis=-1)
    assert scores.shape == expected.shape and np.allclose(scores, expected, atol=1e-4)
