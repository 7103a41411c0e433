"""`privacy-ledger audit verify`: the tamper-evident audit chain recomputed, in full or since the
last verified head, and a signed checkpoint's head proved still held.

A thin adapter (STYLE 8) over the façade (Ledger.verify_chain, operations/audit_chain.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..core.errors import fail
from ..core.lazy import lazy_callable
from . import json_output as cli_json
from .context import book
from .options import JsonOption

checkpoint_head = lazy_callable("ledger.api.chain_keys", "checkpoint_head")


def audit_verify(
    as_json: JsonOption = False,
    since_checkpoint: Annotated[bool, typer.Option(
        "--since-checkpoint", help="Check only the events appended since the last verified head (and the "
                                   "rows they name, and every derived row against the digest kept with the "
                                   "head); with --checkpoint, since its signed head; a full verification when "
                                   "there is none yet.")] = False,
    checkpoint: Annotated[Optional[Path], typer.Option(help="A signed checkpoint (`audit checkpoint`): also "
                                                       "prove the ledger still holds its head.")] = None,
    public_key: Annotated[Optional[Path], typer.Option(help="The checkpoint signer's public key (PEM).")] = None,
) -> None:
    """Recompute the hash chain and compare every row with its audit event (one consistent
    snapshot: writers may go on meanwhile; exit 1 when anything is wrong, an empty chain included);
    with --checkpoint, prove the chain still holds the signed head at its position (no truncation,
    no rewrite); with --since-checkpoint, check only what was appended since the last verified head."""
    from ..core.progress import progress

    if (checkpoint is None) != (public_key is None):
        raise fail("command line", "--public-key" if checkpoint else "--checkpoint",
                   "--checkpoint and --public-key go together")
    head = checkpoint_head(checkpoint, public_key) if checkpoint is not None else None
    ledger = book()
    with progress("verifying the audit chain"):
        found = ledger.verify_chain(since_checkpoint=since_checkpoint, head=head)
    result, mark, lost = found.result, found.mark, found.lost
    if as_json:
        typer.echo(cli_json.dumps({"ok": result.ok and lost is None, "events": result.events, "head": result.head,
                                   "problems": list(result.problems),
                                   "checkpoint": None if head is None else
                                   {"seq": head.seq, "hash": head.hash, "held": lost is None, "why": lost}}))
        if not result.ok or lost is not None:
            raise typer.Exit(1)
        return
    if lost is not None:
        typer.echo(f"checkpoint NOT held: {lost}", err=True)
        raise typer.Exit(1)
    if head is not None:
        # head.at is when the head event was written (the signing time is the file's made_at)
        typer.echo(f"checkpoint held: event {head.seq} has hash {head.hash} "
                   f"({'written ' + head.at if head.at else 'empty ledger'})")
    if result.ok:
        scope = "" if mark is None or result.full else (
            f" (events {mark[0] + 1}-{result.events} checked, appended since the last verified head, event "
            f"{mark[0]})" if result.events > mark[0]
            else f" (no event appended since the last verified head, event {mark[0]})")
        typer.echo(f"audit chain intact: {result.events} events, head {result.head}{scope}")
        return
    typer.echo(f"audit chain BROKEN: first bad event: {result.problems[0]}", err=True)
    for problem in result.problems[1:]:
        typer.echo(f"  also: {problem}", err=True)
    raise typer.Exit(1)
