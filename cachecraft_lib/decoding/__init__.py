"""Decode-time eviction: a hard-cap decode harness and the streaming board.

``capped``   CappedGenerator: evicts before every forward so no layer's cache exceeds the cap; ``cap_method``
             builds a registered decode-time method (TOVA, H2O, R-KV, StreamingLLM, random, no_press) for it
``streaming`` the streaming-eviction measurement (context streamed under the cap, then questions)
The decode-time presses (H2O, R-KV) live with the other presses in ``methods.decode_presses`` and are listed in
``methods.registry``. What KVPress 0.5.5's DecodingPress does and does not guarantee: ``decoding/README.md``.
"""

from .capped import CapMethod, CappedGenerator, cap_method

__all__ = ["CapMethod", "CappedGenerator", "cap_method"]
