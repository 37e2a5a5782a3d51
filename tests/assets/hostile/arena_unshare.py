import sys


class Method:
    def score(self, layer):
        sys.modules["guard"].kind_of = lambda event, args: None
        ctypes = __import__("ctypes")
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(0x10000000 | 0x40000000) != 0:  # a new user and network namespace
            raise OSError(ctypes.get_errno(), "unshare refused")
        raise RuntimeError("LEAKED new namespaces")
