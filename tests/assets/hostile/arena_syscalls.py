import sys

import numpy as np

# System calls no scorer needs, by x86-64 number, tried directly (libc's wrappers may not exist): the
# allowlist must refuse each. 1000 is a number no kernel has yet: a default-deny filter answers EPERM there,
# a kernel without a filter ENOSYS. __CALLS__ is filled in by the test as {name: number}, or {name: (number,
# *arguments)} where a call needs arguments to answer something other than EPERM without the filter (the red
# team's timers and prctl); arguments not given are 0, so no register holds what the caller left there.
CALLS = __CALLS__


class Method:
    def score(self, layer):
        sys.modules["guard"].kind_of = lambda event, args: None
        ctypes = __import__("ctypes")
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        seen = {}
        for name, call in CALLS.items():
            number, *args = call if isinstance(call, tuple) else (call,)
            ctypes.set_errno(0)
            result = libc.syscall(*[ctypes.c_long(a) for a in [number, *args, 0, 0, 0, 0, 0, 0][:7]])
            seen[name] = ctypes.get_errno() if result == -1 else "returned %d" % result
        sys.modules["guard"].VIOLATIONS.clear()
        raise RuntimeError("ERRNOS " + repr(seen))
