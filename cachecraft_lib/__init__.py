"""cachecraft_lib: the library behind the CacheCraft Lab notebooks and the ``cachecraft`` command.

The public names are importable from the package itself, loaded on first use so that ``import cachecraft_lib``
stays cheap (no torch, no KVPress until a name needs them)::

    from cachecraft_lib import FRCPress, Arena, get_method

One job per module, said in its docstring's first line (docs/library_files.md maps every file). Grouped by
concern: ``methods`` (policies, FRC, presses, the registry), ``models``, ``stats``, ``paper``, ``report``,
``util``, and the packages ``ruler``, ``grid``, ``decoding``, ``search``, ``sandbox``, ``tiny``, ``arena``, ``cli``.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# Public name -> the module that defines it. Loaded by name (PEP 562), never at import: the package's own
# import graph (tests/test_house.py) stays what the modules themselves import.
_EXPORTS = {
    "FRCPress": "cachecraft_lib.methods.scorers",
    "FRCScorerPress": "cachecraft_lib.methods.scorers",
    "WholeChunkPress": "cachecraft_lib.methods.scorers",
    "PolicyScorerPress": "cachecraft_lib.methods.scorers",
    "REGISTRY": "cachecraft_lib.methods.registry",
    "Method": "cachecraft_lib.methods.registry",
    "NO_PRESS": "cachecraft_lib.methods.registry",
    "get_method": "cachecraft_lib.methods.registry",
    "make_press": "cachecraft_lib.methods.registry",
    "Arena": "cachecraft_lib.arena.arena",
    "load_model": "cachecraft_lib.models.loading",
    "get_profile": "cachecraft_lib.profiles",
    "evolve": "cachecraft_lib.search.evolve",
    "evolve_async": "cachecraft_lib.search.evolve",
    "board_search": "cachecraft_lib.search.board_search",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    """Load a public name's module the first time the name is asked for, and keep the name on the package."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cachecraft_lib' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
