"""The audit through the façade: the chain verified, checkpoints signed, running totals rebuilt,
and the caps a release's steps would break.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ..accounting import budget
from ..core.records import Release
from ..operations import transactions as operations
from ..store import audit_verify, configuration, sessions

from .reading import Reading


class Audit(Reading):
    """`Ledger`'s audit."""

    def verify(self) -> audit_verify.Verification:
        """Recompute the audit hash chain; `.ok`, `.events`, `.head`, `.problems` (one
        consistent snapshot, sessions.read_session)."""
        with sessions.read_session(self.engine) as session:
            return audit_verify.verify(session)

    def verify_chain(self, *, since_checkpoint: bool = False, head=None):
        """`audit verify`: the chain recomputed (from the last verified head with
        `since_checkpoint`), and whether it still holds a signed `head` (operations/audit_chain.py)."""
        from ..operations.audit_chain import verify_chain

        return verify_chain(self.engine, since_checkpoint, head)

    def sign_checkpoint(self, private_key):
        """(the verification, the head signed, the checkpoint's text): never signed unless it verifies."""
        from ..operations.audit_chain import sign_head

        return sign_head(self.engine, private_key)

    def retotal(self) -> list[str]:
        """Recompute every cap's running total from the releases (an audit event); the caps that differed."""
        from ..operations.audit_chain import retotal

        return retotal(self.engine, self._by())

    def caps_over(self, release: Release) -> list[budget.CapCheck]:
        """The caps on what `release` reads that are over their limit, as `cap list` states them."""
        with sessions.read_session(self.engine) as session:
            caps = [cap for cap in configuration.caps(session, release.dataset) if cap.subset & release.reads]
            return [c for c in operations.cap_checks(session, release.dataset, caps) if c.status == "over"] \
                if caps else []

    def infinite_driver_reasons(self, checks: Sequence[budget.CapCheck], when: datetime | None = None) -> dict:
        """Per cap (dataset, name) with an ∞ driver, each driver's reason (cap_accounting)."""
        from ..operations.cap_accounting import infinite_driver_reasons

        return infinite_driver_reasons(self.engine, checks, when)
