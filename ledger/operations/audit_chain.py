"""The audit chain checked and signed: a verification (in full, or from the last verified head
or a signed checkpoint), a signed checkpoint of the head, and the caps' running totals
recomputed from the history.

Invariants: a verification reads one consistent snapshot (writers may go on); a head is signed
only once the chain verifies; the verified head is remembered only when the chain verifies.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..accounting import budget
from ..core.lazy import lazy_module
from ..store import verified_head
from ..store import audit_chain, audit_verify, configuration, decoded_history, running_totals, session_state, sessions
from ..store.codec import canonical_json, cap_total_to_dict

checkpoint = lazy_module("ledger.store.checkpoint")  # (cryptography: imported by the commands that sign or check)


@dataclass(frozen=True)
class ChainCheck:
    """What `audit verify` found: the verification, the head it started from (None: in full),
    and why the ledger no longer holds the signed head (None: it does, or none was given)."""

    result: audit_verify.Verification
    mark: tuple[int, str] | None
    lost: str | None


def signed_head(path: Path, public_key: Path) -> checkpoint.Head:
    """The checkpoint's head, once its file, the key and the signature are all good (else exit 2)."""
    key = checkpoint.load_public_key(public_key)
    document = checkpoint.load_document(path)
    return checkpoint.signed_head(document, key, str(path))


def verify_chain(engine, since_checkpoint: bool = False, head: checkpoint.Head | None = None) -> ChainCheck:
    """Recompute the hash chain (from the last verified head with `since_checkpoint`; from the
    signed `head` when it keeps the derived rows' digest) and prove it still holds `head`."""
    with sessions.read_session(engine) as session:
        kept = verified_head.read_head(session) if since_checkpoint else None
        if since_checkpoint and head is not None and head.derived is not None:
            kept = verified_head.VerifiedHead(head.seq, head.hash, full_at=None if kept is None else kept.full_at,
                                              derived=head.derived)  # the signed head, not the one in the database
        mark = None if kept is None else (kept.seq, kept.hash)
        result = audit_verify.verify(session) if mark is None else verified_head.verify_since(session, mark, kept.derived)
        lost = _lost(session, head) if head is not None else None
    if result.ok:  # the next --since-checkpoint starts here (not kept when busy or read-only: no wait)
        verified_head.remember(engine, result, full=result.full, previous=kept)
    return ChainCheck(result, mark, lost)


def _lost(session, head: checkpoint.Head) -> str | None:
    """Why the ledger no longer holds a checkpointed head (None: it does)."""
    return checkpoint.compare(head, audit_chain.event_at(session, head.seq) if head.seq else None,
                              audit_chain.chain_head(session).events)


def new_key_pair() -> tuple[bytes, bytes]:
    """An Ed25519 key pair for signing checkpoints: (private, public), each as PEM."""
    return checkpoint.generate_key()


def signing_key(path: Path):
    """The Ed25519 private key (PEM) at `path` (exit 2 when it is not one)."""
    return checkpoint.load_private_key(path)


def sign_head(engine, private) -> tuple[audit_verify.Verification, checkpoint.Head | None, str | None]:
    """(the verification, the head signed, the checkpoint document as text): the chain verified
    from the last verified head (else in full), and its current head signed with the `private`
    key (`signing_key`); a chain that does not verify is never signed (head and document None)."""
    with sessions.read_session(engine) as session:
        kept = verified_head.read_head(session)
        result = audit_verify.verify(session) if kept is None else \
            verified_head.verify_since(session, (kept.seq, kept.hash), kept.derived)
        found = audit_chain.chain_head(session)
    if not result.ok:
        return result, None, None
    verified_head.remember(engine, result, full=result.full, previous=kept)
    head = checkpoint.Head(found.seq, found.hash, found.at, found.events,
                           result.derived if result.events == found.seq else None)
    document = checkpoint.sign(head, private, session_state.now().isoformat())
    return result, head, canonical_json(document) + "\n"


def retotal(engine, actor: str) -> list[str]:
    """Recompute every cap's running total from the releases, as an audit event; returns the
    caps ("dataset/name") whose stored total differed."""
    from . import people

    changed = []
    with sessions.write_session(engine) as session:
        people.require(session, actor, "recompute the running totals")
        config = configuration.configuration(session)
        for dataset, caps in config.caps.items():
            history = decoded_history.snapshot(session, dataset)
            stored = running_totals.cap_totals(session, dataset)
            totals = {cap.name: budget.total_from_history(cap, history.releases.values(), history.families)
                      for cap in caps}
            differ = sorted(name for name, total in totals.items()
                            if name not in stored or cap_total_to_dict(stored[name]) != cap_total_to_dict(total))
            running_totals.save_totals(session, dataset, totals)
            changed += [f"{dataset}/{name}" for name in differ]
        audit_chain.append_event(session, kind="ledger.retotalled", subject="cap totals", actor=actor,
                           payload={"changed": changed})
    return changed
