"""``cachecraft arena init``: a new arena folder, its organiser key and round 1's secret, made by the arena.

Why the arena makes the secret: a secret typed by a person is a phrase, a keyboard walk or a pattern far more
often than it is random; ``init`` draws 256 bits (``secrets.token_bytes``) and writes them outside the checkout
(mode 0600) itself. It prints the organiser key's fingerprint: publish it apart from the arena folder, since
``arena verify``/``site`` call a ledger "verified" only against a key pinned that way (``--public-key``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

from ..arena.scoring.events import Kind

INIT_HELP = ("create an arena: the organiser's signing key, round ROUND's secret (generated: 256 bits, written "
             "outside the checkout, mode 0600) and its commitment in the ledger; prints the key's fingerprint "
             "to publish apart from the arena folder")
FINGERPRINT_HEX = 32  # 128 bits of the key's SHA-256: what `verify --public-key` takes


def _cmd_init(args: argparse.Namespace) -> int:
    from ..arena.arena import Arena
    from ..arena.boards import splits
    from ..arena.scoring import signing
    from ..arena.scoring.ledger import RULES_VERSION

    arena = Arena(args.profile, Path(args.root) if args.root else None, weak_secret_ok=args.weak_secret_ok)
    if arena.ledger.path.exists() and arena.ledger.path.stat().st_size:
        raise FileExistsError(f"{arena.ledger.path} already has events: this arena exists (a new one: --root)")
    if args.typed_secret:  # the organiser's own secret (environment or file), checked by the stronger estimate
        secret, origin, where = splits.load_secret(weak_ok=args.weak_secret_ok), "given", "given (checked)"
    else:
        path = splits.write_secret(args.secret_file)
        secret, origin, where = path.read_text().strip().encode(), "generated", str(path)
    arena.ledger.append(Kind.INIT, {"profile": args.profile, "rules_version": RULES_VERSION,
                                 "secret_origin": origin})
    arena.ensure_round(secret, args.round, origin=origin)
    public = arena.ledger.public_key() or ""
    shown = {"root": str(arena.root), "public_key": public,
             "fingerprint": signing.fingerprint(public, FINGERPRINT_HEX), "round": args.round,
             "secret": where, "secret_origin": origin}
    if args.json:
        print(json.dumps(shown))
        return 0
    print(f"arena created in {arena.root}\norganiser public key: {public}\nfingerprint: {shown['fingerprint']}\n"
          "  publish the fingerprint apart from the arena folder (with the round's announcement); verify with\n"
          f"  cachecraft arena verify --root {arena.root} --public-key {shown['fingerprint']}")
    if origin == "generated":
        export = "" if Path(where) == splits.SECRET_FILE.expanduser().resolve() else \
            f"\n  export {splits.SECRET_FILE_ENV}={where}   (the other verbs read it from there)"
        print(f"round {args.round} secret: 256 bits, generated, written to {where} (mode 0600, outside the "
              f"checkout; keep it private until `arena reveal`){export}")
    return 0


def add_init_verb(verb: Callable[[str, Callable, str], argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``init`` through ``cli.arena``'s ``verb(name, func, help)`` (it adds --profile and --root)."""
    p = verb("init", _cmd_init, INIT_HELP)
    p.add_argument("--round", type=int, default=1, help="the round whose secret is made and committed (default 1)")
    p.add_argument("--secret-file", metavar="PATH",
                   help="where to write the generated secret (default ~/.config/cachecraft/arena_secret); never "
                        "inside the checkout, never over an existing file")
    p.add_argument("--typed-secret", action="store_true",
                   help="use the organiser's own secret ($CACHECRAFT_ARENA_SECRET or the secret file) instead "
                        "of generating one; it must pass the strength estimate (dictionary words, keyboard "
                        "walks, sequences) or --weak-secret-ok")
    p.add_argument("--weak-secret-ok", action="store_true",
                   help="accept a typed secret below the strength estimate; the round's ledger event records it")
    p.add_argument("--json", action="store_true", help="print one JSON object (root, public key, fingerprint, "
                                                      "round, secret path) instead of text")
    return p
