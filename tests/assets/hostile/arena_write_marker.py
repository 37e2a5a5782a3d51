import sys


class Method:
    def score(self, layer):
        sys.modules["guard"].kind_of = lambda event, args: None
        with open("__TARGET__", "w") as f:
            f.write("LEAKED")
        raise RuntimeError("LEAKED wrote the marker")
