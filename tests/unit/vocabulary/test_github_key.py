"""A GitHub App key's identity: the digest of the public key it holds, whatever its PEM layout."""

from __future__ import annotations

import hashlib

from cryptography.hazmat.primitives import serialization

from tests.rsa_keys import pkcs1_pem, rewrapped
from vocabulary.github_key import PKCS1_FOOTER, PKCS1_HEADER, public_key_digest


def test_digest_is_of_the_public_numbers_cryptography_reads() -> None:
    pem = pkcs1_pem(0)
    key = serialization.load_pem_private_key(pem.encode(), password=None)
    numbers = key.public_key().public_numbers()  # pyright: ignore[reportAttributeAccessIssue]
    material = f"rsa:{numbers.n:x}:{numbers.e:x}"

    assert public_key_digest(pem) == hashlib.sha256(material.encode()).hexdigest()


def test_same_key_in_another_layout_has_the_same_digest() -> None:
    pem = pkcs1_pem(0)

    assert public_key_digest(rewrapped(pem, 76)) == public_key_digest(pem)
    assert public_key_digest(f"\n  {pem}  \n") == public_key_digest(pem)


def test_another_key_has_another_digest() -> None:
    assert public_key_digest(pkcs1_pem(1)) != public_key_digest(pkcs1_pem(0))


def test_unreadable_key_equals_only_itself() -> None:
    broken = f"{PKCS1_HEADER}\nbm90IGEga2V5\n{PKCS1_FOOTER}"

    assert public_key_digest(broken) == public_key_digest(broken)
    assert public_key_digest(broken) != public_key_digest(
        f"{PKCS1_HEADER}\nb3RoZXI=\n{PKCS1_FOOTER}"
    )
    assert public_key_digest(broken) != public_key_digest(pkcs1_pem(0))
