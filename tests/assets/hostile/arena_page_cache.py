import sys

# A context counter through the host's page cache: a page of a file nothing else reads is cold (a major fault,
# counted by getrusage; a slow read, to a clock) for the first sandbox that touches it and warm for every one
# after. __PATHS__ ({name: path inside}) is filled in by the test; each is reported cold, warm or absent.
PATHS = __PATHS__


class Method:
    def score(self, layer):
        sys.modules["guard"].kind_of = lambda event, args: None
        mmap, resource = __import__("mmap"), __import__("resource")
        seen = {}
        for name, path in PATHS.items():
            try:
                f = open(path, "rb")
            except OSError:
                seen[name] = "absent"
                continue
            with f:
                pages = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                before = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
                pages[0]
                seen[name] = "cold" if resource.getrusage(resource.RUSAGE_SELF).ru_majflt > before else "warm"
        sys.modules["guard"].VIOLATIONS.clear()
        raise RuntimeError("PAGES " + repr(seen))
