"""Bundle signatures are verified strictly: no key of small order (a forger needs no private key for those) and no
non-canonical signature (S + L verifies under lax checks) is accepted."""
import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from reprokit.study.store import identity

pytestmark = pytest.mark.parallel

# The encodings of Ed25519's points of order 1, 2, 4 and 8 (libsodium refuses each as a public key).
SMALL_ORDER_KEYS = [
    "0100000000000000000000000000000000000000000000000000000000000000",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "0000000000000000000000000000000000000000000000000000000000000080",
    "0000000000000000000000000000000000000000000000000000000000000000",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
]
L = 2**252 + 27742317777372353535851937790883648493  # the order of Ed25519's base point


@pytest.mark.parametrize("key", SMALL_ORDER_KEYS)
def test_no_signature_is_accepted_under_a_small_order_key(key):
    # R = a small-order point, S = 0: under cofactorless checks this verifies whenever the hash of the message
    # makes k*A the identity (for the all-zero key, about one message in four).
    forged = [r + "00" * 32 for r in SMALL_ORDER_KEYS]
    messages = [hashlib.sha256(str(n).encode()).digest() for n in range(64)]
    assert not any(identity.verify(key, sig, m) for sig in forged for m in messages)


def test_a_non_canonical_signature_of_a_valid_one_is_refused():
    key = Ed25519PrivateKey.generate()
    public = identity.public_hex(key)
    payload = b"a manifest"
    signature = bytes.fromhex(identity.sign(key, payload))
    assert identity.verify(public, signature.hex(), payload)
    s = int.from_bytes(signature[32:], "little") + L  # the same scalar mod L, not reduced
    mutated = signature[:32] + s.to_bytes(32, "little")
    assert not identity.verify(public, mutated.hex(), payload)
    assert not identity.verify(public, signature.hex(), payload + b".")


def test_malformed_keys_and_signatures_are_refused_not_raised():
    assert not identity.verify("zz", "00" * 64, b"x")
    assert not identity.verify("00" * 31, "00" * 64, b"x")
    assert not identity.verify(SMALL_ORDER_KEYS[4], "00" * 63, b"x")
