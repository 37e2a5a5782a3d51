"""cachecraft_lib: the library behind the CacheCraft Lab notebooks and the ``cachecraft`` command.

One job per module, said in its docstring's first line; the README's "How it works" maps them, from the
RULER data (``ruler``) and the models (``models``) through the presses (``scorers``, ``presses``) and the grid
(``grid``) to the tables and figures (``analysis``, ``report``, ``plots``), the search (``search``) and the
arena (``arena``).
"""

__version__ = "0.1.0"
