"""`privacy-ledger export`: what the ledger knows, in the formats the field shares.

`export registry` writes a DP Deployments Registry record (ledger.operations.registry_record) as
YAML: the variant, privacy-loss parameters, privacy unit, unprotected
quantities and accounting the ledger knows; placeholders for the rest.
"""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from ..operations import choices
from .context import open_engine
from ..core.errors import fail
from ..core.lazy import lazy_callable, lazy_module

configuration = lazy_module("ledger.store.configuration")  # the ORM, imported when the command runs
dataset_writes = lazy_module("ledger.store.dataset_writes")  # the ORM, imported when the command runs
Session = lazy_callable("sqlmodel", "Session")

export_app = typer.Typer(no_args_is_help=True, help="Export the ledger for others: the DP Deployments Registry.",
                         context_settings={"help_option_names": ["-h", "--help"]})


@export_app.command("registry")
def registry(
    out: Annotated[str, typer.Option("--out", "-o", metavar="FILE.yaml",
                                     help="Where to write the record (`-` for standard output).")],
    dataset: Annotated[Optional[str], typer.Option("--dataset", "-d", metavar="NAME",
                                                   help="Dataset (default: the only one).")] = None,
    tier: Annotated[int, typer.Option("--tier", metavar="1|2|3", help="How complete the record is: 1 basic, "
                                      "2 adds the variant, privacy unit and parameters, 3 adds accounting "
                                      "and implementation.")] = 2,
    as_json: Annotated[bool, typer.Option("--json", help="Print the record as JSON on standard output, "
                                                         "or what was written with --out FILE.")] = False,
) -> None:
    """A DP Deployments Registry record of a dataset's releases, as YAML.

    Fields only a person can fill in (curators, intended use, region, actors, rationale)
    start with PLACEHOLDER."""
    from .outputs import output_target, write_atomically
    from ..operations.registry_record import facts_of, record_delta, record_of
    from ..reporting.registry import to_yaml
    from ..store import columns
    from ..store.facts import charged_facts
    from ..accounting.charge_choice import at_delta

    if tier not in (1, 2, 3):
        raise fail("command line", "--tier", f"must be 1, 2 or 3, found {tier}")
    target = None if out.strip() == "-" else output_target(out)
    # The figures from the accounting rows (as `table` reads them), the releases' own facts by SQL
    # (store.facts): no release is decoded but the few the record names
    with Session(open_engine()) as session:
        light = configuration.write_context(session)
        chosen = choices.pick_dataset(light, dataset)
        caps = configuration.caps(session, chosen.name)
        unit = dataset_writes.privacy_unit(session, chosen.name)
        index = columns.index_for(session, chosen.variable_names, chosen.name, light.families)
        exact = index.releases.seqs[index.exactly_read()].tolist()
        facts = facts_of(charged_facts(session.connection(), chosen.name, exact))
        # Table 1's total row a chunk of releases at a time (its cells at 1M: 800 MB), at the delta
        # record_of reads it at
        delta = record_delta(chosen)
        table = columns.table_in_chunks(index, chosen.name, at_delta(delta), delta, 0) if tier >= 2 else None
        record = record_of(index, facts, chosen, caps, tier=tier, privacy_unit=unit, table=table)  # (reads ids)
    text = to_yaml(record)
    if as_json and target is None:
        typer.echo(json.dumps(record, indent=2, ensure_ascii=False))
        return
    if target is None:
        typer.echo(text, nl=False)
        return
    write_atomically(target, text.encode("utf-8"))
    if as_json:
        typer.echo(json.dumps({"ok": True, "dataset": chosen.name, "tier": tier, "out": str(target)}))
        return
    typer.echo(f"wrote the tier {tier} registry record of dataset {chosen.name} to {target}")
