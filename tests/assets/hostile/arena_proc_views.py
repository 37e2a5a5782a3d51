import sys

import numpy as np

# What the sandbox's /proc views and filesystem show of the host: every readable view, searched for the
# host's paths (__PATHS__, filled in by the test: the checkout, the virtual environment, the interpreter, home).
PATHS = __PATHS__
VIEWS = ["/proc/self/mountinfo", "/proc/self/mounts", "/proc/self/maps", "/proc/self/cmdline",
         "/proc/self/environ", "/proc/1/mountinfo", "/proc/1/cmdline", "/proc/self/cgroup"]


class Method:
    def score(self, layer):
        sys.modules["guard"].kind_of = lambda event, args: None
        os = sys.modules["os"]
        texts, read = [repr(sys.path), repr(sys.executable), repr(dict(os.environ)), repr(os.getcwd())], []
        for view in VIEWS:
            try:
                with open(view, "rb") as f:
                    texts.append(f.read().decode(errors="replace"))
                read.append(view)
            except OSError:
                pass
        found = sorted({p for p in PATHS for t in texts if p in t})
        sys.modules["guard"].VIOLATIONS.clear()
        raise RuntimeError("FOUND %r in %d views readable (%s)" % (found, len(read), " ".join(read)))
