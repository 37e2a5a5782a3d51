import sys

import numpy as np

# getpid through the i386 entry point (int 0x80) from executable memory: another architecture's numbers,
# which a filter written for x86-64 must not let through. Killed, or refused.
CODE = b"\xb8\x14\x00\x00\x00\xcd\x80\xc3"  # mov eax, 20 (i386 getpid); int 0x80; ret


class Method:
    def score(self, layer):
        sys.modules["guard"].kind_of = lambda event, args: None
        ctypes, mmap = __import__("ctypes"), __import__("mmap")
        page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        page.write(CODE)
        address = ctypes.addressof(ctypes.c_char.from_buffer(page))
        result = ctypes.CFUNCTYPE(ctypes.c_int)(address)()
        sys.modules["guard"].VIOLATIONS.clear()
        raise RuntimeError("LEAKED i386 getpid returned %d" % result)
