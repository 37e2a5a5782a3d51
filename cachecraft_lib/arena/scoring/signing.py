"""The organiser's Ed25519 key: it signs every ledger event and every published head.

Why a signature and not only a hash chain: anyone can recompute a chain of SHA-256 hashes after editing a line,
so a chain alone proves nothing to a third party. With each event's hash signed by the organiser's private key,
only its holder can write a valid event; anyone checks it with the public key.

- the private key: ``<arena>/private/organiser_ed25519.pem`` (mode 0600; never published, never readable by a
  sandboxed method), created with the ledger's first event;
- the public key: ``<arena>/ledger.pub``, 64 hex characters (the raw 32-byte key). ``cachecraft arena init``
  prints it and its fingerprint: publish them apart from the arena folder (with the round's announcement) and
  verify with ``--public-key``. A verifier who takes the key from the arena folder trusts whoever can write
  that folder: ``verify`` then says "signed, key not pinned", never "verified".
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

PRIVATE_NAME, PUBLIC_NAME = "organiser_ed25519.pem", "ledger.pub"


class KeyMissing(RuntimeError):
    """The organiser's private key is not where the ledger expects it: appending is impossible."""


def canonical(body: dict[str, Any]) -> bytes:
    """The bytes a hash or a signature covers: sorted keys, no spaces."""
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def fingerprint(public_hex: str, length: int = 16) -> str:
    """A short name for a public key: the first ``length`` hex of its SHA-256 (``arena init`` prints 32, 128
    bits, to pin with ``--public-key``; messages show 16)."""
    return hashlib.sha256(bytes.fromhex(public_hex)).hexdigest()[:length]


def public_hex(key: Ed25519PrivateKey) -> str:
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return raw.hex()


def load_private(path: Path) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError) as err:
        raise KeyMissing(f"cannot read the organiser's key {path} ({err}); only the organiser appends to this "
                         "ledger") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyMissing(f"{path} is not an Ed25519 private key")
    return key


def create_private(path: Path) -> Ed25519PrivateKey:
    """A new key at ``path`` (0600), refusing to overwrite one (that would orphan every signed event)."""
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    return key


def sign(key: Ed25519PrivateKey, message: bytes) -> str:
    return key.sign(message).hex()


def valid(public: str, message: bytes, signature: str) -> bool:
    """Does ``signature`` (hex) sign ``message`` under ``public`` (hex)? False on any malformed input."""
    try:
        Ed25519PublicKey.from_public_bytes(bytes.fromhex(public)).verify(bytes.fromhex(signature), message)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def same_key(a: str, b: str) -> bool:
    return hmac.compare_digest(a.strip().lower(), b.strip().lower())


def head_body(events: int, last_hash: str, public: str) -> dict[str, Any]:
    """What a published head states (and its signature covers)."""
    return {"ledger": "cachecraft-arena", "events": int(events), "hash": last_hash, "public_key": public}
