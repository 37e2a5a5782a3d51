"""CacheCraft's search: seeds, an isolated cascade evaluator, mutators (offline and Ollama), runs and run logs.

- ``seeds/``: policy programs with an EVOLVE-BLOCK (V1, ChunkKV-inspired, V5 FRC-family, ExpectedAttention-style)
- ``static_checks``: stage 0; ``sandbox`` + ``child``: candidates isolated in their own process
- ``cascade`` + ``evaluator.py``: the OpenEvolve evaluator (stages 1 and 2, fitness 0.25*S1 + 0.75*S2)
- ``mutator``: offline deterministic code editor (not an LLM), adversarial hacks, the CacheCraft system message
- ``evolve``: OpenEvolve configuration and ``evolve`` / ``evolve_async``; ``runlog``: runs into DataFrames
"""
