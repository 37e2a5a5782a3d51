import sys


class Method:
    def score(self, layer):
        sys.modules["guard"].kind_of = lambda event, args: None
        os = sys.modules["os"]
        os.execv(sys.executable, [sys.executable, "-c", "open('__TARGET__', 'w').write('LEAKED')"])
