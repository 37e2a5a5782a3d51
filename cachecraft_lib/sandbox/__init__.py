"""The one sandbox for untrusted code (arena submissions and search candidates); the boundary is the OS.

``boundary``: bubblewrap namespaces + seccomp + cgroup, or a refusal that says what to install (fail closed);
``cgroup``: memory and process caps of the whole sandbox; ``seccomp``: the system-call filters;
``watch``: the child's process, its CPU and wall limits; ``box``: a child answering request frames;
``runtime/``: what runs inside (``serve.py``, the wire format ``frames.py``, the audit reporter
``guard.py``, and ``policy_api.py``, the numpy-only helpers a search program imports). See docs/sandbox.md.
"""

from .boundary import FULL, BoundaryUnavailable, missing_parts, plan
from .box import Box, BoxLimits, WallBudget
from .runtime.frames import FrameError, clean_text
from .watch import Failure

__all__ = ["FULL", "Box", "BoxLimits", "BoundaryUnavailable", "Failure", "FrameError", "clean_text", "missing_parts",
           "plan", "WallBudget"]
