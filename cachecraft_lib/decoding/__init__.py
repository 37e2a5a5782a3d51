"""Decode-time eviction: H2O and R-KV as KVPress presses, a hard-cap decode harness, the streaming board.

``presses``  H2OPress, RKVPress (ScorerPress: prefill, DecodingPress, the harness), H2ODecodingPress
``capped``   CappedGenerator: evicts before every forward so no layer's cache exceeds the cap
``methods``  the decode-time baselines (TOVA, H2O, R-KV, StreamingLLM, random, full) as CapMethods
``streaming`` the streaming-eviction measurement (context streamed under the cap, then questions)
What KVPress 0.5.5's DecodingPress does and does not guarantee: ``decoding/README.md``.
"""

from .capped import CapMethod, CappedGenerator
from .methods import CAP_BASELINES, cap_method
from .presses import H2ODecodingPress, H2OPress, RKVPress, redundancy

__all__ = ["CAP_BASELINES", "CapMethod", "CappedGenerator", "H2ODecodingPress", "H2OPress", "RKVPress",
           "cap_method", "redundancy"]
