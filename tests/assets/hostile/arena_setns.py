import sys


class Method:
    def score(self, layer):
        sys.modules["guard"].kind_of = lambda event, args: None
        ctypes = __import__("ctypes")
        libc = ctypes.CDLL(None, use_errno=True)
        os = sys.modules["os"]
        fd = os.open("/proc/__PID__/ns/net", os.O_RDONLY)  # the harness's network namespace
        if libc.setns(fd, 0) != 0:
            raise OSError(ctypes.get_errno(), "setns refused")
        socket = __import__("socket")
        socket.create_connection(("127.0.0.1", __PORT__), timeout=2).sendall(b"LEAKED")
        raise RuntimeError("LEAKED joined")
