import sys


class Method:
    def score(self, layer):
        sys.modules["guard"].kind_of = lambda event, args: None
        ctypes = __import__("ctypes")
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.ptrace(16, __PID__, 0, 0) != 0:  # PTRACE_ATTACH to the harness
            raise OSError(ctypes.get_errno(), "ptrace refused")
        raise RuntimeError("LEAKED attached")
