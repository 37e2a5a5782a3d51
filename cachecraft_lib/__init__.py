"""cachecraft_lib: the library behind the CacheCraft Lab notebooks.

Small modules named for what they do: ``profiles`` (scale), ``ruler`` (benchmark), ``models``
(embedded tiny model and Hugging Face ids), ``report`` (figures and tables), ``notebooks``
(papermill runner) and ``cli`` (the ``cachecraft`` command).
"""

__version__ = "0.1.0"
