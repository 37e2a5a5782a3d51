"""A keyed MinHash sketch of the tokens a program keeps on a round's test contexts: ``program_sketch``.

Why (fifth red team, 2026-12-05): an exact digest of what a program keeps on *public* dev inputs had two holes.
A program could recognise those fixed inputs (by a length, a key's norm) and change one kept token on them only:
a fresh digest every time, the same behaviour on the test items. And a variant changing one unimportant kept
token anywhere had a fresh digest too, yet its test score is the program's. So ``behaviour`` now runs the
program on the first test context of each task and length of the round (the organiser holds the secret at submit
time; a program cannot act otherwise on these inputs without acting otherwise on scored items), and this module turns
the kept ``(context, budget, layer, KV head, token index)`` tuples into a sketch whose matching is near, not
exact: ``plan_looks`` counts two looks as one program when the estimated Jaccard similarity of their kept sets
is at least ``THRESHOLD``.

Keyed: every tuple is hashed under ``sketch_key`` (an HMAC of the round's secret, board and round), and each of
the ``SIZE`` sketch values is a keyed 32-bit hash of its minimum, so the public ledger's sketch can be compared
with another sketch of the same board and round and with nothing else: not with anything computed on public
data, nor inverted to the kept indices of hidden items. What comparing two sketches reveals is how alike two
submitted programs are on the round's contexts; each submission is already a counted look.

Threshold: ``THRESHOLD`` = 0.9, from the margins measured in tests/test_behaviour_digest.py (synthetic inputs)
and stated in docs/board_fitness.md: a one-token variant is at about 0.98-1.0, different example methods at
most 0.78 (board A's smoke test contexts; 0.63 on the cpu board's). A variant must change about 5% of its kept tokens on the sampled contexts ((1 - f) / (1 + f)
< 0.9) to count as another program; how much that moves its score is the program's business, not the sketch's.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import numpy as np

SIZE = 512  # sketch values (32-bit each): the Jaccard estimate's standard error is sqrt(J (1 - J) / SIZE)
SIZES = (128, SIZE)  # sizes a ledger may hold (128 before the sixth red team: 0.027 at J = 0.9, now 0.013)
THRESHOLD = 0.9  # two sketches of one board and round are one program at or above this similarity
VALUE_BYTES = 4
_C1, _C2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)  # splitmix64's finaliser


def sketch_key(secret: bytes, board: str, round_: int) -> bytes:
    """The round's sketch key: the organiser's secret never leaves; a board and round never share a key."""
    return hmac.new(secret, f"cachecraft:behaviour-sketch:v1|{board}|{int(round_)}".encode(), hashlib.sha256).digest()


def _where(context: int, budget: int, layer: int) -> int:
    """The high bits of a tuple's code: context (12 bits), budget (6), layer (10); head (10) and token (26) below."""
    return ((context & 0xFFF) << 52) | ((budget & 0x3F) << 46) | ((layer & 0x3FF) << 36)


def press_selection(scores: np.ndarray, budget: int, head_adaptive: bool) -> tuple[np.ndarray, np.ndarray]:
    """The (head, token) pairs the board's press keeps given validated (H, L) scores, by the press's own code
    (sixth red team: a stable argsort broke ties otherwise than ``torch.topk``, and the probe ignored AdaKV's
    ``alpha_safeguard``): ``ScorerPress``'s ``topk`` per head, or ``AdaKVPress.compress`` itself on the tensor."""
    import torch

    t = torch.from_numpy(np.ascontiguousarray(scores))[None]
    heads, tokens = scores.shape
    if budget >= tokens:  # ratio 0: every press keeps every token
        return np.divmod(np.arange(heads * tokens), tokens)
    if not head_adaptive:
        top = t.topk(budget, dim=-1).indices[0].numpy()
        return np.repeat(np.arange(heads), top.shape[1]), top.ravel()
    from kvpress import AdaKVPress, ScorerPress

    class _Given(ScorerPress):
        def score(self, *args: Any) -> torch.Tensor:
            return t.clone()

    module = type("Layer", (), {"config": type("Config", (), {"_attn_implementation": "sdpa"})()})()
    ratio = 1.0 - (budget + 0.5) / tokens  # compute_n_kept(tokens, ratio) == budget, never one less by rounding
    AdaKVPress(_Given(compression_ratio=ratio)).compress(module, None, None, None, None, {})
    kept = np.ones((heads, tokens), bool)
    _, h, i = module.masked_key_indices
    kept[h.numpy(), i.numpy()] = False
    return np.nonzero(kept)


def _rows(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(H, n) rows as opaque byte strings: a token's key and value, concatenated, compared byte for byte."""
    both = np.ascontiguousarray(np.concatenate([keys, values], axis=-1).astype(np.float32))
    return both.view(np.dtype((np.void, both.shape[-1] * 4)))[..., 0]


def cache_tokens(keys: np.ndarray, values: np.ndarray, idx: np.ndarray, new: dict[str, np.ndarray],
                 base: int) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """What the cache holds after a ``keep`` answer and its ``Rewrite``, by content (sixth red team: a program
    naming decoy indices while writing the original's kept rows over them kept the original's cache under
    another sketch): each slot is the original token of its head whose (key, value) row it holds byte for byte
    (the lowest such token), and a slot holding no original row is coded by a hash of its content (head and
    bytes). Returns the matched (head, token) pairs and the codes of the unmatched slots."""
    heads = np.arange(idx.shape[0])[:, None]
    final_k = new.get("keys", keys[heads, idx])
    final_v = new.get("values", values[heads, idx])
    orig, final = _rows(keys, values), _rows(final_k, final_v)
    head_out, tok_out, extra = [], [], []
    for h in range(idx.shape[0]):
        table, first = np.unique(orig[h], return_index=True)
        at = np.clip(np.searchsorted(table, final[h]), 0, len(table) - 1)
        hit = table[at] == final[h]
        head_out.append(np.full(int(hit.sum()), h))
        tok_out.append(first[at[hit]])
        extra += [int.from_bytes(hashlib.blake2b(base.to_bytes(8, "little") + h.to_bytes(4, "little") + r.tobytes(),
                                                 digest_size=8).digest(), "little") for r in final[h][~hit]]
    return np.concatenate(head_out), np.concatenate(tok_out), extra


def kept_codes(sub: Any, parts: dict[str, np.ndarray], shape: tuple[int, int, int], budget: int,
               where: tuple[int, int, int], layer: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """The tuples one layer keeps given the method's raw answer (validated as the press validates it), as uint64
    codes: a ``score`` answer's tokens as the board's press selects them (``press_selection``), a ``keep``
    answer's indices; with a ``Rewrite``, what the cache then holds by content
    (``cache_tokens``, given the layer's original ``(keys, values)``; without them, one code per array)."""
    from ..submissions.sandbox import validate_indices, validate_rewrite, validate_scores

    heads, tokens, _ = shape
    base, extra = _where(*where), []
    if sub.returns == "scores":
        scores = validate_scores(parts["out"], heads, tokens)
        head, tok = press_selection(scores, budget, getattr(sub, "allocation", "uniform") == "head_adaptive")
    else:
        validate_indices(parts["out"], heads, tokens, budget)
        idx, new = validate_rewrite(parts, parts["out"], shape)
        head, tok = np.repeat(np.arange(heads), idx.shape[1]), idx.ravel()
        if new and layer is not None:
            head, tok, extra = cache_tokens(layer[0], layer[1], idx, new, base)
        elif new:
            extra = [int.from_bytes(hashlib.blake2b(base.to_bytes(8, "little") + k.encode() + new[k].tobytes(),
                                                    digest_size=8).digest(), "little") for k in sorted(new)]
    codes = np.uint64(base) | (head.astype(np.uint64) & np.uint64(0x3FF)) << np.uint64(26) \
        | (tok.astype(np.uint64) & np.uint64((1 << 26) - 1))
    return np.concatenate([codes.astype(np.uint64), np.array(extra, dtype=np.uint64)])


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser (a bijection of uint64), elementwise; wraps on overflow as intended."""
    z = (z ^ (z >> np.uint64(30))) * _C1
    z = (z ^ (z >> np.uint64(27))) * _C2
    return z ^ (z >> np.uint64(31))


def salts(key: bytes, size: int = SIZE) -> np.ndarray:
    """The key's ``size + 1`` salts: the first keys each tuple's hash, the others pick each value's minimum."""
    return np.frombuffer(hashlib.shake_256(b"minhash-salts|" + key).digest(8 * (size + 1)), dtype="<u8")


def shown(minimum: int, key: bytes) -> str:
    """A minimum as the ledger shows it: a keyed 32-bit digest (``_mix`` is invertible; this is not)."""
    return hashlib.blake2b(int(minimum).to_bytes(8, "little"), key=key, digest_size=VALUE_BYTES).hexdigest()


def minhash(codes: np.ndarray, key: bytes, size: int = SIZE) -> str:
    """The keyed sketch of a set of codes (hex, ``size`` x 32 bits): per salt, the element whose mixed keyed hash
    is least, ``shown`` under the key."""
    salt = salts(key, size)
    with np.errstate(over="ignore"):
        h0 = _mix(np.unique(codes.astype(np.uint64)) ^ salt[0])
        return "".join(shown(h0[int(np.argmin(_mix(h0 ^ s)))], key) for s in salt[1:])


def parsed(sketch: object) -> np.ndarray | None:
    """A sketch as the ledger may hold it (``SIZES`` values): its values, or None when it is not one (never raises)."""
    if not isinstance(sketch, str) or len(sketch) not in {2 * VALUE_BYTES * n for n in SIZES}:
        return None
    try:
        return np.frombuffer(bytes.fromhex(sketch), dtype=np.uint32)
    except ValueError:
        return None


def similarity(a: object, b: object) -> float | None:
    """The estimated Jaccard similarity of two sketches' kept sets, or None when either is not a sketch; sketches of
    two sizes on their common first values (``salts`` is an extendable output: a shorter sketch is a prefix)."""
    x, y = parsed(a), parsed(b)
    n = None if x is None or y is None else min(len(x), len(y))
    return None if n is None else float(np.mean(x[:n] == y[:n]))


def near(a: object, b: object, threshold: float = THRESHOLD) -> bool:
    """Are two sketches (of one board and round: the caller checks) one program's? Similarity >= ``threshold``."""
    s = similarity(a, b)
    return s is not None and s >= threshold


def keyed_digest(codes: np.ndarray, key: bytes) -> str:
    """``program_behaviour`` of a set of codes: its exact keyed digest (HMAC-SHA256 of the sorted codes)."""
    return hmac.new(key, b"behaviour:v2" + np.unique(codes.astype(np.uint64)).tobytes(), hashlib.sha256).hexdigest()
