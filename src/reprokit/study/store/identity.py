"""A results store's signing key: what proves which evaluator a bundle comes from.

Each store has an Ed25519 key pair made once (``origin.key``, mode 0600, beside
``origin.json``). The private key never leaves the store: export takes only
``records/`` and ``runs/``, and signs the bundle's manifest (which holds the
sha256 of every file) with it. A new store's origin id is the fingerprint of
its public key, so a bundle can claim only the origin whose key signed it; a
store made before stores had keys keeps its random id, and an importer pins the
first key it sees for such an id (bundle.py).
"""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nacl.exceptions import BadSignatureError, CryptoError
from nacl.signing import VerifyKey

from reprokit.core.errors import UserError
from reprokit.core.files import read_regular
from reprokit.core.outputs import create_once

KEY_FILE = "origin.key"
MAX_KEY_BYTES = 64 << 10  # an Ed25519 key in PEM is 119 bytes


def load_or_create_key(path: Path) -> Ed25519PrivateKey:
    """The key at ``path``, made (exclusively, so concurrent makers agree on one) when there is none."""
    if not os.path.lexists(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        pem = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        create_once(path, pem, 0o600)  # False: another process made it first; use theirs
    pem = read_regular(path, "the store's signing key", MAX_KEY_BYTES)
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise UserError(f"the store's signing key {path} is unreadable ({exc}); restore it from a backup, or move "
                        f"the store's origin.json and {path.name} aside to start a new identity") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UserError(f"the store's signing key {path} is not an Ed25519 key; restore the file")
    return key


def public_hex(key: Ed25519PrivateKey) -> str:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()


def fingerprint(public_key_hex: str) -> str:
    """The origin id a public key proves: the first 40 hex digits of its sha256 (ids made before keys are
    32: uuid4().hex)."""
    return hashlib.sha256(bytes.fromhex(public_key_hex)).hexdigest()[:40]


# What an origin id looks like when a store made it: a fingerprint, or uuid4().hex from before keys. Anything else
# (``local``, ``here``) was written by hand, and would read in a report as a name of this store.
STORE_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{32}")
STORE_ID_FORM = "40 hex digits, its key's fingerprint; 32 for a store made before keys"


def is_fingerprint(origin_id: str) -> bool:
    """An id made from a key (``fingerprint``), which only that key can claim."""
    return len(origin_id) == 40 and STORE_ID.fullmatch(origin_id) is not None


def sign(key: Ed25519PrivateKey, payload: bytes) -> str:
    return key.sign(payload).hex()


def verify(public_key_hex: str, signature_hex: str, payload: bytes) -> bool:
    """Strict Ed25519 verification (libsodium, through PyNaCl): small-order public keys and non-canonical
    signatures are refused. OpenSSL's, behind ``cryptography``, accepts a fixed signature under the all-zero
    (small-order) key for about one message in four, so a bundle could be forged with no private key at all."""
    try:
        VerifyKey(bytes.fromhex(public_key_hex)).verify(payload, bytes.fromhex(signature_hex))
    except (BadSignatureError, CryptoError, ValueError, TypeError):
        return False
    return True
