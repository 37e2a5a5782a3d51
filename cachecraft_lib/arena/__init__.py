"""The arena: KV-eviction methods submitted to fixed boards, scored on hidden test items (after the reference arena,
see docs/glossary.md). Rooms: ``boards/`` (boards as data, items, splits and secret, MATH-500), ``submissions/``
(folder checks, the method API, the sandboxed press, conversion from a search program), ``scoring/`` (score,
gate, points, the signed ledger, leaderboards), ``judges/``, ``site/`` and ``examples/`` (example submission
folders). At the top: ``arena.py`` (the ``Arena`` class: the verbs), ``board_runner.py`` and ``board_c.py`` (running
methods on a board), ``calibration.py``, ``decode.py``, ``ray_eval.py``; its baselines are in ``methods/registry.py``.
The rules and why: ``cachecraft_lib/arena/README.md``.
"""
