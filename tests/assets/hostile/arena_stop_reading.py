import sys

import numpy as np

# After its first answer the method stops reading its requests: a timer's handler that never returns
# (__MODE__: "burn" spins on the CPU, "sleep" blocks without using it). The harness's next request (a few MB)
# fills the pipe: its write must not hold the harness.
time = sys.modules["time"]


def stall(signum, frame):
    while True:
        if "__MODE__" == "sleep":
            time.sleep(1)


class Method:
    def score(self, layer):
        guard = sys.modules["guard"]
        guard.kind_of = lambda event, args: None
        signal = sys.modules["signal"] if "signal" in sys.modules else __import__("signal")
        signal.signal(signal.SIGALRM, stall)  # the test sends SIGALRM from outside (timers are off the allowlist)
        guard.VIOLATIONS.clear()
        return np.linalg.norm(layer.keys, axis=-1)
