"""Seeds of the arena's splits: a public dev seed per board, hidden test seeds derived from a secret.

The test items of a round are generated from ``test_seed(secret, board, round)``, an HMAC of the secret, so
nobody without the secret can regenerate them, and a different secret gives different items. Before a round
the ledger records ``commitment(secret, round, salt)`` with a fresh random ``salt`` (``new_salt``, published in
the same event: a list of guesses hashed in advance is useless against it); ``submit`` and ``reveal`` check the
secret against it before anything runs, and after ``reveal`` anyone checks ``verify_reveal``: the items were
fixed before any submission was scored.

A secret must be hard to guess: at least ``MIN_SECRET_BYTES`` characters and an entropy estimate
(``entropy_bits``) of at least ``MIN_SECRET_BITS``. The estimate is the least of several upper bounds, so that
neither repetition nor structure fools it: the empirical Shannon entropy (length x bits per character) and the
zlib size (level 9, less its fixed overhead) of the secret's shortest repeating unit (``"password" * 8`` counts
as one ``"password"``), and the same two of its successive differences (``"abcd...xyz0123..."`` is a run of
steps of one). ``new_secret`` draws 256 bits (``secrets.token_hex(32)``: 218 or more by the estimate in 20,000
draws, 244 on average); it is an estimate that refuses obvious patterns, not a proof of randomness.

Test seeds are drawn from ``[TEST_LOW, TEST_HIGH)`` and checked against every seed the project uses elsewhere
(training streams, the model card's evaluation seeds, profile and bootstrap seeds, the dev seeds): a clash
is re-drawn, so a test item is never one the tiny model trained on or the card reported.

The secret comes from ``CACHECRAFT_ARENA_SECRET`` or a file outside the checkout (``SECRET_FILE``, or the
path in ``CACHECRAFT_ARENA_SECRET_FILE``); a secret file inside the repository is refused (it would be
published with the code).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import secrets
import zlib
from collections import Counter
from pathlib import Path

SECRET_ENV, SECRET_FILE_ENV = "CACHECRAFT_ARENA_SECRET", "CACHECRAFT_ARENA_SECRET_FILE"
SECRET_FILE = Path("~/.config/cachecraft/arena_secret")
DEV_BASE, DEV_SPAN = 7_000_000, 1_000_000
TEST_LOW, TEST_HIGH = 3_000_000_000, 4_000_000_000  # below 2**32 (pandas' random_state), above every other seed
TRAINING_STEPS_MAX = 10_000_000  # training draws Random(recipe.seed * 1_000_003 + step): this many steps reserved
MIN_SECRET_BYTES, MIN_SECRET_BITS = 32, 128
COMMITMENT_SCHEME = "sha256(salt|round|secret)-v2"
CREATE_HINT = (f"create one outside the checkout: mkdir -p ~/.config/cachecraft && python -c \"import secrets; "
               f"print(secrets.token_hex(32))\" > {SECRET_FILE} && chmod 600 {SECRET_FILE} "
               f"(or export {SECRET_ENV}=<a random string: at least {MIN_SECRET_BYTES} characters and an estimated "
               f"{MIN_SECRET_BITS} bits>)")


class SecretMissing(RuntimeError):
    """No usable arena secret (absent, too short, too guessable): the message says how to create one."""


class SecretMismatch(RuntimeError):
    """The secret given is not the one the round's commitment binds: nothing was run."""


def dev_seed(board: str) -> int:
    """The public seed of ``board``'s dev items (the same for everyone, every round)."""
    return DEV_BASE + zlib.crc32(f"arena-dev|{board}".encode()) % DEV_SPAN


def new_secret() -> str:
    """A fresh random secret (hex), for whoever runs a round."""
    return secrets.token_hex(32)


def load_secret(repo_root: str | Path | None = None) -> bytes:
    """The arena secret from the environment or a file outside the checkout; ``SecretMissing`` otherwise."""
    value = os.environ.get(SECRET_ENV)
    if value is not None:
        return _checked(value.strip().encode(), f"${SECRET_ENV}")
    path = Path(os.environ.get(SECRET_FILE_ENV) or SECRET_FILE).expanduser()
    if not path.exists():
        raise SecretMissing(f"no arena secret: ${SECRET_ENV} is unset and {path} does not exist; {CREATE_HINT}")
    root = Path(repo_root) if repo_root else Path(__file__).resolve().parents[3]
    if path.resolve().is_relative_to(root.resolve()):
        raise SecretMissing(f"the arena secret {path} lies inside the checkout {root}, where it would be "
                            f"published with the code; move it out: {CREATE_HINT}")
    return _checked(path.read_text().strip().encode(), str(path))


def entropy_bits(secret: bytes) -> float:
    """An upper-bound estimate of the secret's entropy in bits: the least of the Shannon and zlib estimates of
    its repeating unit and of its successive differences (+8 bits for the first character)."""
    if not secret:
        return 0.0
    unit = secret[: _period(secret)]
    steps = bytes((b - a) % 256 for a, b in zip(secret, secret[1:], strict=False))
    return min(_shannon_bits(unit), _zlib_bits(unit), 8 + _shannon_bits(steps), 8 + _zlib_bits(steps))


def _shannon_bits(data: bytes) -> float:
    """Length times the empirical Shannon entropy per byte (an upper bound for anything but random text)."""
    counts = Counter(data)
    return max(0.0, -sum(c * math.log2(c / len(data)) for c in counts.values()))


_ZLIB_OVERHEAD = len(zlib.compress(b"", 9))  # header, empty block and checksum: 8 bytes


def _zlib_bits(data: bytes) -> float:
    """Bits zlib needs for ``data`` beyond its fixed overhead: repeated substrings compress away."""
    return 8.0 * max(0, len(zlib.compress(data, 9)) - _ZLIB_OVERHEAD)


def _period(data: bytes) -> int:
    """The length of the shortest unit whose repetition (the last copy possibly cut short) is ``data``."""
    return next((p for p in range(1, len(data)) if data[p:] == data[:-p]), len(data))


def check_secret(secret: bytes, where: str = "the secret given") -> bytes:
    """``secret`` when it is long and varied enough; ``SecretMissing`` saying why otherwise."""
    if len(secret) < MIN_SECRET_BYTES:
        raise SecretMissing(f"the arena secret in {where} is shorter than {MIN_SECRET_BYTES} characters; {CREATE_HINT}")
    bits = entropy_bits(secret)
    if bits < MIN_SECRET_BITS:
        raise SecretMissing(f"the arena secret in {where} is too guessable: about {bits:.0f} bits estimated (repeats "
                            f"and runs such as 'abcd' or '0123' count little), at least {MIN_SECRET_BITS} needed; {CREATE_HINT}")
    return secret


def _checked(secret: bytes, where: str) -> bytes:
    return check_secret(secret, where)


def reserved_seeds() -> set[int]:
    """Every seed used elsewhere in the project (the test seeds must avoid them); training is a range."""
    from ...profiles import PROFILES
    from ...stats.intervals import SEED as BOOTSTRAP_SEED
    from ...tiny.measure import EVAL_SEED, HELDOUT_SEED
    from ...tiny.recipe import Recipe

    seeds = {EVAL_SEED, HELDOUT_SEED, BOOTSTRAP_SEED, 7, 0, Recipe().seed, *(p.seed for p in PROFILES.values())}
    return {int(s) for s in seeds}


def _training_ranges() -> list[range]:
    from ...tiny.recipe import Recipe

    start = Recipe().seed * 1_000_003
    return [range(start, start + TRAINING_STEPS_MAX)]


def is_reserved(seed: int, boards: tuple[str, ...] = ()) -> bool:
    """True when ``seed`` is a training, model-card, profile, bootstrap or dev seed."""
    if seed in reserved_seeds() or any(seed in r for r in _training_ranges()):
        return True
    return seed in {dev_seed(b) for b in boards} or DEV_BASE <= seed < DEV_BASE + DEV_SPAN


def test_seed(secret: bytes, board: str, round: int) -> int:  # noqa: A002 - the contract's name
    """The seed of ``board``'s hidden test items in ``round``: an HMAC of the secret, re-drawn on a clash."""
    if not secret:
        raise SecretMissing(f"the test split needs the arena secret; {CREATE_HINT}")
    for attempt in range(100):
        digest = hmac.new(secret, f"arena-test|{board}|{round}|{attempt}".encode(), hashlib.sha256).digest()
        seed = TEST_LOW + int.from_bytes(digest[:8], "big") % (TEST_HIGH - TEST_LOW)
        if not is_reserved(seed, (board,)):
            return seed
    raise RuntimeError("no free test seed in 100 draws (cannot happen with the reserved ranges as they are)")


def new_salt() -> str:
    """A fresh random salt for a round's commitment (128 bits, hex), published with it."""
    return secrets.token_hex(16)


def commitment(secret: bytes, round: int, salt: str) -> str:  # noqa: A002
    """The hash the ledger records before a round: binds the round to this secret without revealing it; the
    published random ``salt`` makes every round's hash new (no guess list computed in advance applies)."""
    if not salt:
        raise ValueError("a commitment needs a salt (splits.new_salt(), published with it)")
    return hashlib.sha256(b"cachecraft-arena-commitment-v2|" + salt.encode() + b"|" + str(int(round)).encode()
                          + b"|" + secret).hexdigest()


def verify_reveal(secret: bytes, round: int, recorded: str, salt: str) -> bool:  # noqa: A002
    """Does a revealed secret match the commitment recorded (with ``salt``) for ``round``?"""
    return hmac.compare_digest(commitment(secret, round, salt), recorded)
