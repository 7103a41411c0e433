"""Commands that run mechanisms on data: `run`, `assess`, `sample-privacy`.

Thin adapters over ledger.mechanisms: read the CSV, hand it to the mechanism,
write the output. Bad input exits 2 before anything is recorded; a cap that
would break exits 1 before the data is touched.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..core.errors import InputErrors, LedgerError, fail
from ..core.lazy import lazy_callable, lazy_module
from ..core.records import CHARGED_STATUSES, Status
from .options import DatasetOption  # (one definition: -d / --dataset)

decoded_history = lazy_module("ledger.store.decoded_history")  # the ORM, imported when a command runs
sessions = lazy_module("ledger.store.sessions")  # the ORM, imported when a command runs
Session = lazy_callable("sqlmodel", "Session")

if TYPE_CHECKING:
    import pandas as pd


def _read_csv(path: Path, option: str) -> "pd.DataFrame":
    import pandas as pd  # imported when a command needs it: every command starts faster

    try:
        return pd.read_csv(path)
    except FileNotFoundError:
        raise fail(str(path), option, "no such file") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError) as exc:
        raise fail(str(path), option, f"cannot read as CSV: {exc}") from None


def _check_out(out: Optional[Path]) -> None:
    """--out refused before any work when it must not be written (outputs.output_target)."""
    if out is not None:
        from . import outputs

        outputs.output_target(out)


def _params(pairs: list[str]) -> dict[str, str]:
    params: dict[str, str] = {}
    errors = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            errors.append(LedgerError("command line", "--param", f"expected KEY=VALUE, found {pair!r}"))
            continue
        params[key.strip()] = value.strip()
    if errors:
        raise InputErrors(errors)
    return params


def _as_typed(error: LedgerError, data: Path, params: dict) -> LedgerError:
    """A mechanism's problem located as the steward typed it: `--data FILE`, `--sample` or
    `-p NAME` (a parameter given, or a required one missing); any other is left as it is."""
    if error.source != "run":
        return error
    if error.field == "data":
        return LedgerError(str(data), "--data", error.message)
    if error.field in ("sample", "mechanism"):
        return LedgerError("command line", "--sample" if error.field == "sample" else "MECHANISM", error.message)
    if error.field in params or error.message.endswith(f"missing {error.field}") or \
            f"missing {error.field}," in error.message:
        return LedgerError("command line", f"-p {error.field}", error.message)
    return error


def run(
    mechanism: Annotated[str, typer.Argument(help="crosstab, laplace-sum, laplace-mean, gaussian-sum, gaussian-mean, "
                                                  "tan-consistent-counts, p-percent, attribute-gaussian, modular-sum")],
    data: Annotated[Path, typer.Option("--data", help="The confidential data, CSV (never stored).")],
    release_id: Annotated[str, typer.Option("--id", help="The release id to record.")],
    param: Annotated[Optional[list[str]], typer.Option("--param", "-p", help="KEY=VALUE, repeatable: epsilon=1, "
                                                                              "columns=a,b, margin=..., ...")] = None,
    dataset: DatasetOption = None,
    title: Annotated[str, typer.Option(help="Release title.")] = "",
    covariance: Annotated[Optional[Path], typer.Option(help="attribute-gaussian: the assumed covariance, CSV "
                                                            "with a header row and the attribute names as index.")] = None,
    sample: Annotated[Optional[int], typer.Option(help="Run on this many records drawn uniformly without "
                                                       "replacement; the epsilon recorded is the tight amplified "
                                                       "bound ln(1 + beta (e^eps - 1)) of Balle, Barthe and "
                                                       "Gaboardi 2018 (Clifton et al., Theorem 2, is looser).")]
    = None,
    seed: Annotated[Optional[int], typer.Option(help="Seed the noise (reproducible tests only; default: "
                                                     "a cryptographically sound seed).")] = None,
    status: Annotated[str, typer.Option(help="planned (the output exists but is not out; charged from "
                                             "now, it cannot be cancelled), or published "
                                             "(it goes straight out: its recorder's own approval, so it needs the approver role "
                                             "and a dataset with self_approval: true).")] = "planned",
    out: Annotated[Optional[Path], typer.Option(help="Write the output here as CSV (default: standard output).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON: what was recorded, and the output "
                                                         "unless --out is given.")] = False,
) -> None:
    """Run a mechanism on data and record its release in the same step."""
    from ..operations.choices import pick_dataset as _pick_dataset
    from .context import actor as _actor, open_engine as _engine, read_light as _read_light
    from ..operations.recording import run_and_record

    _check_out(out)
    params: dict = _params(param or [])
    if covariance is not None:
        matrix = _read_csv(covariance, "--covariance")
        params["covariance"] = matrix.set_index(matrix.columns[0])
    if status not in (Status.PLANNED.value, Status.PUBLISHED.value):
        # approved would be approved by the person who ran it: separation of duties (docs/explanation/model.md#people-duties-and-the-book-of-record)
        raise fail("command line", "--status", f"must be planned or published, found {status!r} (a release "
                                               "is approved by another person, with `approve`)")
    chosen_status = Status(status)
    frame = _read_csv(data, "--data")
    chosen = _pick_dataset(_read_light(), dataset)
    try:
        result = run_and_record(_engine(), mechanism, frame, dataset=chosen.name, release_id=release_id,
                                params=params, actor=_actor(), title=title, sample=sample, seed=seed,
                                status=chosen_status)
    except InputErrors as exc:  # named as typed: the data file, `-p NAME`, --sample (not "run: data")
        raise InputErrors([_as_typed(e, data, params) for e in exc.errors]) from None
    text = result.output.to_csv(index=False, lineterminator="\n")
    if as_json:
        if out is not None:
            from . import outputs

            outputs.write_atomically(out, text)
        published = result.derived or result.release
        typer.echo(json.dumps({"ok": True, "recorded": [result.release.id] + ([result.derived.id] if result.derived
                                                                              else []),
                               "output_digest": published.output_digest,
                               "output": None if out is not None else text}, indent=2, ensure_ascii=False))
        return
    if out is None:
        typer.echo(text, nl=False)
    else:
        from . import outputs

        outputs.write_atomically(out, text)
    published = result.derived or result.release
    recorded = [result.release.id] + ([result.derived.id] if result.derived else [])
    typer.echo(f"recorded {', '.join(recorded)} (output digest {published.output_digest[:16]}…)", err=True)


def assess(
    data: Annotated[Path, typer.Option("--data", help="Contributor microdata, CSV.")],
    cells: Annotated[str, typer.Option(help="Cell key variables, comma separated.")],
    contributor: Annotated[str, typer.Option(help="The contributor id variable.")],
    value: Annotated[str, typer.Option(help="The magnitude variable.")],
    p: Annotated[float, typer.Option("--p", help="p% rule: p, in percent.")] = 10.0,
    threshold: Annotated[int, typer.Option(help="Frequency rule: fewer contributors than this is unsafe.")] = 3,
    dominance: Annotated[str, typer.Option(help="(n,k) dominance rule as n,k.")] = "2,85",
    out: Annotated[Optional[Path], typer.Option(help="Write the per-cell assessment here as CSV.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Primary sensitivity of magnitude-table cells: p% rule, frequency rule, (n,k) dominance."""
    from ..mechanisms.errors import MechanismInputError
    from ..mechanisms.ppercent import assess_cells

    _check_out(out)
    frame = _read_csv(data, "--data")
    try:
        n, k = (float(part) for part in dominance.split(","))
    except ValueError:
        raise fail("command line", "--dominance", f"expected n,k such as 2,85, found {dominance!r}") from None
    try:
        result = assess_cells(frame, [c.strip() for c in cells.split(",")], contributor, value,
                              p_percent=p, threshold=threshold, dominance=(int(n), k))
    except MechanismInputError as exc:  # named as the steward typed it: the option, not the function's argument
        raise fail(str(data), ASSESS_OPTIONS.get(exc.field, exc.field), exc.message) from None
    if out is not None:
        from . import outputs

        outputs.write_atomically(out, result.cells.to_csv(index=False))
    if as_json:
        typer.echo(json.dumps({"cells": json.loads(result.cells.to_json(orient="records")),
                               "summary": json.loads(result.summary.reset_index().to_json(orient="records"))}, indent=2))
        return
    typer.echo(result.cells.to_string(index=False))
    typer.echo("")
    typer.echo(result.summary.reset_index().to_string(index=False))


ASSESS_OPTIONS = {"cell_keys": "--cells", "contributor": "--contributor", "value": "--value", "p_percent": "--p",
                  "threshold": "--threshold", "dominance": "--dominance", "data": "--data"}


def sample_privacy(
    dataset: DatasetOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Perfect sample privacy of the recorded disclosure mappings, alone and together."""
    from ..operations.choices import pick_dataset as _pick_dataset
    from .context import open_engine as _engine, read_light as _read_light
    from ..operations.recording import joint_sample_leakage

    chosen = _pick_dataset(_read_light(), dataset)
    with sessions.read_session(_engine()) as session:
        releases = [r for r in decoded_history.snapshot(session, chosen.name).releases.values() if r.status in CHARGED_STATUSES]
    results = joint_sample_leakage(releases)
    if as_json:
        typer.echo(json.dumps(results, indent=2))
        return
    if not results:
        typer.echo("no perfectly sample-private releases recorded")
    for group in results:
        typer.echo(f"{group['variable']} ({group['n']} samples, uniform mod {group['modulus']}): "
                   f"{len(group['releases'])} release(s)")
        for release_id, bits in group["alone"].items():
            typer.echo(f"  {release_id} alone: max I(X_i; Y) = {bits:.3g} bits")
        worst = max(range(len(group["together_bits"])), key=group["together_bits"].__getitem__)
        verdict = "perfectly sample-private" if group["perfect_together"] else \
            f"REVEAL record {worst}: I(X_{worst}; all outputs) = {group['together_max_bits']:.3g} bits"
        typer.echo(f"  together: {verdict}")
