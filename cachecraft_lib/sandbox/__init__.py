"""The one sandbox for untrusted code (arena submissions and search candidates); the boundary is the OS.

``boundary``: bubblewrap namespaces + seccomp + a cgroup where one can be had, or a refusal that says what to
install (fail closed); ``bwrap``: bubblewrap's command, neutral paths, the uid outside (never root);
``cgroup_mode``/``cgroup``/``cgroup2``: memory and task caps of the whole sandbox (v1, v2 or none);
``seccomp``/``allowlist``: the default-deny system-call filter;
``watch``: the child's process, its CPU and wall limits; ``box``: a child answering request frames;
``runtime/``: what runs inside (``serve.py``, the wire format ``frames.py``, the audit reporter
``guard.py``, and ``policy_api.py``, the numpy-only helpers a search program imports). See docs/sandbox.md.
"""

from .boundary import FULL, FULL_V2, NO_CGROUP, WHOLE, BoundaryUnavailable, is_whole, missing_parts, plan
from .box import Box, Limits, WallBudget
from .runtime.frames import FrameError, clean_text
from .watch import Failure

__all__ = ["FULL", "FULL_V2", "NO_CGROUP", "WHOLE", "Box", "Limits", "BoundaryUnavailable", "Failure", "FrameError",
           "clean_text", "is_whole", "missing_parts", "plan", "WallBudget"]
