import sys

import numpy as np

# The per-user kernel quotas: the limits the sandbox's process has, and real-time signals queued to itself (each
# counts against its uid's RLIMIT_SIGPENDING: with a uid shared with the host, the host's). The first call queues
# them and answers (the test reads the queue's length from outside, /proc's SigQ); the next reports the limits.


class Method:
    def __init__(self):
        self.calls = 0

    def score(self, layer):
        sys.modules["guard"].kind_of = lambda event, args: None
        os, signal, resource = sys.modules["os"], __import__("signal"), __import__("resource")
        self.calls += 1
        if self.calls == 1:
            signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
            for _ in range(__SIGNALS__):
                os.kill(os.getpid(), signal.SIGRTMIN)  # kill() never fails on a full queue: it drops the signal
            sys.modules["guard"].VIOLATIONS.clear()
            return np.linalg.norm(layer.keys, axis=-1)
        names = ("RLIMIT_SIGPENDING", "RLIMIT_NPROC", "RLIMIT_MSGQUEUE", "RLIMIT_MEMLOCK")
        limits = {name: resource.getrlimit(getattr(resource, name))[0] for name in names}
        sys.modules["guard"].VIOLATIONS.clear()
        raise RuntimeError("LIMITS " + repr(limits))
