"""Signed checkpoints: the audit chain's head, kept outside the database (docs/explanation/model.md#people-duties-and-the-book-of-record).

The hash chain (store.append_event) detects an edited event, but not a chain
rewritten from the genesis onwards nor a tail cut off: both leave a chain that
verifies. A checkpoint is the head at one moment -- its sequence number, its
hash, its time and the number of events -- signed with an Ed25519 key
(RFC 8032, through `cryptography`). Whoever keeps the file and the public key
can later prove the ledger still holds that exact event at that position:

- a truncated tail: the ledger has fewer events than the checkpoint's seq;
- a rewritten chain: the event at that seq has another hash (every later hash
  depends on it, SHA-256 over the previous hash and the event);
- a forged checkpoint: the signature does not verify under the public key.

A checkpoint also carries the derived rows' digest at its head (derived.py): `audit verify
--since-checkpoint --checkpoint FILE` starts from the signed head and its signed digest, so
derived rows edited together with the digest kept in the database are found all the same.

Pure functions over bytes and dicts; reading key and checkpoint files is done
here too (`load_*`), each problem an error naming the file and field.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .codec import canonical_json
from ..core.errors import LedgerError, fail

FORMAT = "privacy-ledger checkpoint 1"


@dataclass(frozen=True)
class Head:
    """The audit chain's head: the last event's seq and hash, its time, and how many
    events the chain holds (equal to seq in an intact chain)."""

    seq: int
    hash: str
    at: str  # the last event's time (ISO 8601), "" for an empty ledger
    events: int
    derived: dict | None = None  # the derived rows' digest at this head (derived.py), signed with it

    def to_dict(self) -> dict:
        body = {"seq": self.seq, "hash": self.hash, "at": self.at, "events": self.events}
        return body if self.derived is None else {**body, "derived": self.derived}


def generate_key() -> tuple[bytes, bytes]:
    """A new Ed25519 key pair as (private PEM, public PEM)."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public


def sign(head: Head, key: Ed25519PrivateKey, made_at: str) -> dict:
    """The checkpoint document: the head, when it was made, and the Ed25519 signature over
    the canonical JSON of both (codec.canonical_json)."""
    body = {"format": FORMAT, "head": head.to_dict(), "made_at": made_at}
    signature = key.sign(canonical_json(body).encode())
    public = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return {**body, "public_key": base64.b64encode(public).decode(), "signature": base64.b64encode(signature).decode()}


def signed_head(document: dict, key: Ed25519PublicKey, source: str) -> Head:
    """The head a checkpoint document vouches for, once its signature verifies under `key`."""
    body = {name: document.get(name) for name in ("format", "head", "made_at")}
    try:
        signature = base64.b64decode(document.get("signature", ""), validate=True)
    except (ValueError, TypeError):
        raise fail(source, "signature", "not base64") from None
    try:
        key.verify(signature, canonical_json(body).encode())
    except InvalidSignature:
        raise fail(source, "signature", "does not verify under the given public key: the checkpoint was "
                                        "signed by another key, or changed after signing") from None
    return _head(document["head"], source)


def _head(data, source: str) -> Head:
    problems = []
    if not isinstance(data, dict):
        raise fail(source, "head", "missing or not an object")
    for name, kind in (("seq", int), ("hash", str), ("at", str), ("events", int)):
        if not isinstance(data.get(name), kind) or isinstance(data.get(name), bool):
            problems.append(LedgerError(source, f"head.{name}", f"missing or not a {kind.__name__}"))
    if problems:
        from ..core.errors import InputErrors

        raise InputErrors(problems)
    derived = data.get("derived")
    if derived is not None and not (isinstance(derived, dict) and derived.get("seq") == data["seq"]):
        raise fail(source, "head.derived", "not the derived rows' digest of this head")
    return Head(data["seq"], data["hash"], data["at"], data["events"], derived)


def load_document(path: Path) -> dict:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise fail(str(path), "", f"cannot read: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise fail(str(path), "", f"not a checkpoint (not JSON: {exc})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise fail(str(path), "format", f"not a privacy-ledger checkpoint (expected format {FORMAT!r})")
    return document


def _read_pem(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise fail(str(path), "", f"cannot read the key file: {exc.strerror or exc}") from None


def load_private_key(path: Path) -> Ed25519PrivateKey:
    pem = _read_pem(path)
    if b"-----BEGIN PUBLIC KEY-----" in pem:  # the .pub half, handed where the signing key goes
        raise fail(str(path), "key", "this is a public key: --key takes the private key `audit keygen` wrote beside "
                                     "it (the file without .pub)")
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise fail(str(path), "key", f"not an unencrypted PEM private key ({exc}); make one with "
                                     "`privacy-ledger audit keygen --out NAME`") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise fail(str(path), "key", f"an {type(key).__name__}, not an Ed25519 private key")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    pem = _read_pem(path)
    if b"PRIVATE KEY-----" in pem:  # the signing half: a verifier needs only the .pub file
        raise fail(str(path), "key", "this is a private key: --public-key takes the .pub file `audit keygen` wrote "
                                     "beside it (keep the private key with whoever signs checkpoints)")
    try:
        key = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError) as exc:
        raise fail(str(path), "key", f"not a PEM public key ({exc})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise fail(str(path), "key", f"an {type(key).__name__}, not an Ed25519 public key")
    return key


def compare(checkpoint: Head, found: tuple[int, str] | None, events: int) -> str | None:
    """Why the ledger does not hold the checkpointed head, or None when it does.

    found: (seq, hash) of the ledger's event at the checkpoint's seq, None when absent;
    events: how many events the ledger holds now."""
    if checkpoint.seq == 0:
        return None  # an empty ledger's head: every ledger extends it
    if found is None:
        return (f"the ledger holds {events} events but the checkpoint's head is event {checkpoint.seq}: "
                "the chain's tail was cut off (truncated)")
    if found[1] != checkpoint.hash:
        return (f"event {checkpoint.seq} has hash {found[1]}, the checkpoint says {checkpoint.hash}: "
                "the chain was rewritten up to or before that event")
    return None
