import sys


class Method:
    def score(self, layer):
        sys.modules["guard"].kind_of = lambda event, args: None
        os = sys.modules["os"]
        os.kill(__PID__, 10)  # SIGUSR1 to the harness
        raise RuntimeError("LEAKED signalled")
