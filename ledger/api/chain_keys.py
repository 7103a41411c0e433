"""Keys and the audit chain outside one opened ledger: checkpoint signing keys, a signed
checkpoint's head, and the chain's status read on an engine of its own (a forked helper's).
"""

from __future__ import annotations

from pathlib import Path

from ..store import engines, sessions


def signing_key(path: str | Path):
    """The Ed25519 private key (PEM) a checkpoint is signed with (exit 2 when it is not one)."""
    from ..operations.audit_chain import signing_key as read_key

    return read_key(Path(path))


def checkpoint_head(path: str | Path, public_key: str | Path):
    """A signed checkpoint's head, once its file, the key and the signature are all good."""
    from ..operations.audit_chain import signed_head

    return signed_head(Path(path), Path(public_key))


def new_key_pair() -> tuple[bytes, bytes]:
    """An Ed25519 key pair for signing checkpoints: (private, public), each as PEM."""
    from ..operations.audit_chain import new_key_pair as made

    return made()


def chain_status_at(url: str):
    """The audit chain's status as a report states it (operations/report_inputs.verify_for_report),
    read on an engine of its own (a forked helper never uses another process's connections)."""
    from ..operations.report_inputs import verify_for_report

    engine = engines.make_engine(url)
    try:
        with sessions.read_session(engine) as session:
            return verify_for_report(session)
    finally:
        engine.dispose()


def load_verification() -> None:
    """Import what a verification of the chain uses (before forking helpers that share them)."""
    from ..accounting import cap_states, ledger_index  # noqa: F401
    from ..store import accounting_check, index_from_rows, verified_head  # noqa: F401
