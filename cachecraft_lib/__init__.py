"""cachecraft_lib: the library behind the CacheCraft Lab notebooks and the ``cachecraft`` command.

One job per module, said in its docstring's first line; the README's "How it works" maps every file. Grouped by
concern: ``methods`` (policies, FRC, presses, the registry), ``models``, ``stats``, ``paper``, ``report``,
``util``, and the packages ``ruler``, ``grid``, ``decoding``, ``search``, ``sandbox``, ``tiny``, ``arena``, ``cli``.
"""

__version__ = "0.1.0"
