"""`privacy-ledger releases`: every recorded release, a row each, with who ended it and why.

Read a page at a time through the façade (Ledger.release_pages), never the whole ledger at once.
"""

from __future__ import annotations

import json

import typer

from ..core.lazy import lazy_callable
from .context import book
from .options import DatasetOption, JsonOption

release_json = lazy_callable("ledger.reporting.views", "release_json")
release_document = lazy_callable("ledger.api.outputs", "release_document")


def releases(dataset: DatasetOption = None, as_json: JsonOption = False) -> None:
    """List recorded releases."""
    # the releases decoded a page at a time (Ledger.release_pages), with the steps of that page's
    # releases alone, never the whole ledger at once: a million releases held as Release objects
    # took gigabytes; the output is the same (the text table keeps each release's cells,
    # a line of text, until every column's width is known)
    pages = book().release_pages(dataset)
    if as_json:
        _releases_json(pages)
        return
    import zlib

    from ..reporting.views import RELEASES_HEADER, release_cells, releases_line, releases_widths

    # the table's cells kept a page at a time as one compressed text (each cell ended by a
    # separator no cell holds; else that page's cells themselves), the columns' widths found
    # on the way, then the lines: at a million releases the rows as texts held 422 MB
    kept_pages: list = []
    widths = None
    ended_lines = []
    for light, page, steps in pages:
        cells = [release_cells(r, light.datasets) for r in page]
        widths = releases_widths(cells, widths)
        text = "".join(cell + _SEPARATOR for line in cells for cell in line)
        kept_pages.append(zlib.compress(text.encode("utf-8"), 1) if text.count(_SEPARATOR) == sum(map(len, cells))
                          else cells)
        del text
        for release in page:  # who retracted or cancelled, when, and why (docs/explanation/model.md#people-duties-and-the-book-of-record)
            ended = next((s for s in reversed(steps.get(release.id, [])) if s.get("reason") is not None), None)
            if ended:
                ended_lines.append(f"{release.id}: {ended['step']} by {ended['by']} at {ended['at']}: "
                                   f"{ended['reason']}")
    if widths is None:
        typer.echo("no releases" + (f" in dataset {dataset}" if dataset else ""))
        return
    widths = releases_widths([RELEASES_HEADER], widths)
    typer.echo(releases_line(RELEASES_HEADER, widths))
    n_cells = len(RELEASES_HEADER)
    for kept in kept_pages:
        if isinstance(kept, bytes):
            cells = zlib.decompress(kept).decode("utf-8").split(_SEPARATOR)[:-1]
            kept = [cells[k:k + n_cells] for k in range(0, len(cells), n_cells)]
        typer.echo("\n".join(releases_line(row, widths) for row in kept))
    for line in ended_lines:
        typer.echo(line)


_SEPARATOR = "\x1f"  # (the unit separator) between a `releases` row's cells while its widths are found


def _releases_json(pages) -> None:
    """`releases --json`, a page at a time: the text json.dumps(list, indent=2) gives (each
    element is its own dump, indented one level more)."""
    from ..reporting.views import release_charge_json

    first = True
    for light, page, steps in pages:
        # the charge the text table shows (its column), as a figure
        items = [json.dumps({**release_json(release_document(r)), **release_charge_json(r, light.datasets.get(r.dataset)),
                             "steps": steps.get(r.id, [])}, indent=2,
                            ensure_ascii=False).replace("\n", "\n  ") for r in page]
        typer.echo(("[\n  " if first else ",\n  ") + ",\n  ".join(items), nl=False)
        first = False
    typer.echo("[]" if first else "\n]")
