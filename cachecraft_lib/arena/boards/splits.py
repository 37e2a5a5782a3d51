"""Seeds of the arena's splits: a public dev seed per board, hidden test seeds derived from a secret.

The test items of a round are generated from ``test_seed(secret, board, round)``, an HMAC of the secret, so
nobody without the secret can regenerate them, and a different secret gives different items. Before a round
the ledger records ``commitment(secret, round, salt)`` with a fresh random ``salt`` (``new_salt``, published in
the same event: a list of guesses hashed in advance is useless against it); ``submit`` and ``reveal`` check the
secret against it before anything runs, and after ``reveal`` anyone checks ``verify_reveal``: the items were
fixed before any submission was scored.

A secret must be hard to guess. ``cachecraft arena init`` generates it (``write_secret``: 256 bits from
``secrets.token_bytes``, written as hex outside the checkout with mode 0600). A secret a person typed (the
environment variable or a file) must be at least ``MIN_SECRET_BYTES`` characters and pass
``strength.estimate`` at ``MIN_SECRET_BITS``: the least of estimates that repetition, runs, dictionary words,
keyboard walks, English phrases and de Bruijn sequences cannot fool; or the organiser passes ``weak_ok``
(``--weak-secret-ok``), which the round's ledger event records. ``entropy_bits`` is the cheap repeats-and-runs
bound alone (``new_secret`` draws score 218 or more by it in 20,000 draws).

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
import os
import secrets
import zlib
from collections.abc import Callable
from pathlib import Path

from .strength import estimate, runs_bits

SECRET_ENV, SECRET_FILE_ENV = "CACHECRAFT_ARENA_SECRET", "CACHECRAFT_ARENA_SECRET_FILE"
SECRET_FILE = Path("~/.config/cachecraft/arena_secret")
DEV_BASE, DEV_SPAN = 7_000_000, 1_000_000
TEST_LOW, TEST_HIGH = 3_000_000_000, 4_000_000_000  # below 2**32 (pandas' random_state), above every other seed
TRAINING_STEPS_MAX = 10_000_000  # training draws Random(recipe.seed * 1_000_003 + step): this many steps reserved
MIN_SECRET_BYTES, MIN_SECRET_BITS = 32, 128
COMMITMENT_SCHEME = "sha256(salt|round|secret)-v2"
CREATE_HINT = ("let the arena generate one: `cachecraft arena init` (256 bits, written outside the checkout, mode "
               f"0600, at {SECRET_FILE} or --secret-file PATH, then export {SECRET_FILE_ENV}=PATH); a secret typed "
               f"by a person ({SECRET_ENV}) needs at least {MIN_SECRET_BYTES} characters and an estimated "
               f"{MIN_SECRET_BITS} bits, python -c \"import secrets; print(secrets.token_hex(32))\" makes one")


SPLIT_GUARDS: list[Callable[[str], None]] = []  # installed by search.dev_only; empty for the arena itself


def guard_split(split: str) -> None:
    """Let every installed split guard refuse ``split`` (it raises); a no-op when none is installed. Called where
    a split's seed is derived (``test_seed``, ``items.split_seed``) and its items drawn (``items.board_items``),
    so a guarded process cannot reach the test split by any of them, even with the secret in hand."""
    for refuse in tuple(SPLIT_GUARDS):
        refuse(split)


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


def load_secret(repo_root: str | Path | None = None, weak_ok: bool = False) -> bytes:
    """The arena secret from the environment or a file outside the checkout; ``SecretMissing`` otherwise."""
    value = os.environ.get(SECRET_ENV)
    if value is not None:
        return check_secret(value.strip().encode(), f"${SECRET_ENV}", weak_ok)
    path = Path(os.environ.get(SECRET_FILE_ENV) or SECRET_FILE).expanduser()
    if not path.exists():
        raise SecretMissing(f"no arena secret: ${SECRET_ENV} is unset and {path} does not exist; {CREATE_HINT}")
    root = Path(repo_root) if repo_root else Path(__file__).resolve().parents[3]
    if path.resolve().is_relative_to(root.resolve()):
        raise SecretMissing(f"the arena secret {path} lies inside the checkout {root}, where it would be "
                            f"published with the code; move it out: {CREATE_HINT}")
    return check_secret(path.read_text().strip().encode(), str(path), weak_ok)


def entropy_bits(secret: bytes) -> float:
    """The repeats-and-runs upper bound alone (``strength.runs_bits``; ``check_secret`` takes the least of all)."""
    return runs_bits(secret) if secret else 0.0


def check_secret(secret: bytes, where: str = "the secret given", weak_ok: bool = False) -> bytes:
    """``secret`` when it is long and hard enough to guess (``weak_ok``: long enough; the caller records that the
    estimate was waived); ``SecretMissing`` saying why otherwise."""
    if len(secret) < MIN_SECRET_BYTES:
        raise SecretMissing(f"the arena secret in {where} is shorter than {MIN_SECRET_BYTES} characters; {CREATE_HINT}")
    found = estimate(secret)
    if found.bits < MIN_SECRET_BITS and not weak_ok:
        raise SecretMissing(f"the arena secret in {where} is too guessable: about {found.bits:.0f} bits estimated "
                            f"({found.weakest}), at least {MIN_SECRET_BITS} needed; {CREATE_HINT} (or accept it "
                            "with --weak-secret-ok: the ledger records it)")
    return secret


def write_secret(path: str | Path | None = None, repo_root: str | Path | None = None) -> Path:
    """A new round secret (256 bits from ``secrets.token_bytes``, hex) at ``path`` (default ``SECRET_FILE``),
    mode 0600, never inside the checkout and never over an existing file (``FileExistsError``)."""
    target = Path(path or SECRET_FILE).expanduser().resolve()
    root = Path(repo_root) if repo_root else Path(__file__).resolve().parents[3]
    if target.is_relative_to(root.resolve()):
        raise SecretMissing(f"{target} lies inside the checkout {root}, where it would be published with the "
                            "code; pass a path outside it (--secret-file)")
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_bytes(32).hex() + "\n")
    return target


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
    guard_split("test")
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
