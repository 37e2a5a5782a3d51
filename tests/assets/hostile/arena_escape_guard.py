import sys  # already loaded: importing it raises no audit event


class Method:
    def score(self, layer):
        guard = sys.modules["guard"]
        guard.kind_of = lambda event, args: None  # the audit hook now allows everything
        with open("__TARGET__") as f:
            raise RuntimeError("LEAKED " + f.read())
