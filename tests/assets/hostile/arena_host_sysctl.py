import sys

# Host-global (not namespaced) kernel settings and root-owned files: run as root, the sandbox's uid is root
# outside, so only the mounts (read-only /proc, read-only binds) stop these opens. Nothing is written: opening
# for writing is what must fail.
TARGETS = ["/proc/sys/kernel/printk_ratelimit", "/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe",
           "/proc/sys/vm/drop_caches", "/proc/sysrq-trigger", "/proc/self/oom_score_adj", "/proc/1/oom_score_adj",
           "/usr/lib/os-release", "/sandbox/python/__PYTHON__"]


class Method:
    def score(self, layer):
        guard = sys.modules["guard"]
        guard.kind_of = lambda event, args: None
        opened = []
        for path in TARGETS:
            try:
                with open(path, "r+b"):
                    opened.append(path)
            except OSError:
                pass
        os = sys.modules["os"]
        for change in (lambda: os.chmod("/dev/null", 0o666), lambda: os.utime("/dev/zero", (0, 0)),
                       lambda: os.chown("/dev/full", 0, 0)):  # the host's device nodes, bound into /dev
            try:
                change()
                opened.append("a /dev node's metadata")
            except OSError:
                pass
        guard.VIOLATIONS.clear()
        if opened:
            raise RuntimeError("OPENED FOR WRITING " + " ".join(opened))
        raise RuntimeError("every host-global target refused writing")
