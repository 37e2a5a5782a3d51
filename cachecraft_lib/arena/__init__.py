"""The arena of seed 004: KV-eviction methods submitted to fixed boards, scored on hidden test items.

Boards as data (``boards``/``boards/*.yaml``), their items (``items``), evaluation on the suite's shared
prefill and batched decoding (``evaluate``), scores normalised to the full cache (``score``), budget
calibration (``calibrate``), leaderboards derived from the ledger (``leaderboard``) and the verbs
(``harness``, ``cachecraft arena ...``). Submissions, sandboxing, the submission press, splits and secret,
gate, points and ledger are ``submission``, ``press``, ``splits``, ``gate``, ``points``, ``ledger``.
The rules and why: ``cachecraft_lib/arena/README.md``.
"""
