import sys

import numpy as np


def burn(signum, frame):
    end = time.process_time() + __SECONDS__  # runs after the reply, while the harness does its own work
    while time.process_time() < end:
        pass


time = sys.modules["time"]


class Method:
    def score(self, layer):
        guard = sys.modules["guard"]
        guard.kind_of = lambda event, args: None
        signal = sys.modules["signal"] if "signal" in sys.modules else None
        if signal is None:
            import signal  # noqa: PLC0415
        signal.signal(signal.SIGALRM, burn)  # the test sends SIGALRM from outside: timers are off the allowlist,
        # and the accounting behind them (CPU between calls, after the last) must hold whatever the trigger
        guard.VIOLATIONS.clear()
        return np.linalg.norm(layer.keys, axis=-1)
