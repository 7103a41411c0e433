"""Writing a report: the context of a ledger's report rendered in one format and written to one file.

`write_report(ledger, out)` is what the Python API, the web app and the command line's small
reports write: the inputs come from the façade (`Ledger.report_inputs`), the context from
`report.build_report`, the bytes from the Jinja templates of `reports/`, pandas for CSV, and
headless Chromium for PDF. Bad input (an unknown format, a --since that is not a date, an out
that must not be written) is refused before any work, and the file is written whole or not at all
(store/files.py's guard: never the ledger itself).

The PDF is the HTML report printed by Chromium (through Playwright's Python package), so the two
are the same document: styles and SVG charts inline, no network (every request that is not the
page itself is refused).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from datetime import datetime
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.errors import fail
from ..core.failures import neutralise
from ..core.lazy import lazy_callable, lazy_module

if TYPE_CHECKING:
    from ..api import Ledger
    from .report import ReportContext

# the report's context builder and the templates' environment: imported when a report is made,
# not by the command line's `--help`, which only registers the command
_report = lazy_module("ledger.reporting.report")
risk_frame = lazy_callable("ledger.reporting.risk_view", "risk_frame")
report_environment = lazy_callable("ledger.reporting.views", "report_environment")

TEMPLATES = {"html": "report.html.j2", "pdf": "report.html.j2", "md": "report.md.j2", "tex": "report.tex.j2"}
CHROMIUM_ENV = "LEDGER_CHROMIUM"  # path of the Chromium used for PDF (default: the system's chromium)
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def write_report(ledger: Ledger, out: str | Path, *, format: str | None = None,  # noqa: A002
                 dataset: str | None = None, delta: object = None, since: str | datetime | None = None,
                 as_of: str | datetime | None = None) -> Path:
    """Write the report of `ledger`'s dataset to `out` (html, pdf, md, tex or csv; by default from
    `out`'s extension) and return its path. `since`: with the meeting pack (`report --since`; a
    datetime, or ISO 8601 text as --since takes it); `as_of`: as the ledger stood then (`--as-of`)."""
    from ..api.moments import report_moments
    from ..api.outputs import guarded_target, guarded_write
    from ..operations import choices

    chosen_format = choices.report_format(format, str(out))
    since_at, as_of_at = report_moments(since, as_of)
    target = guarded_target(out, ledger.url, "out", "argument")  # (before any work; again when written)
    inputs = ledger.report_inputs(dataset, delta=delta, since=since_at, as_of=as_of_at)
    context = _report.build_report(inputs, charts=chosen_format in ("html", "pdf"), draw=_report.draw_here)
    guarded_write(target, render(context, chosen_format), ledger.url, "out", "argument")
    return target


def find_chromium(option: str = "--format") -> str:
    """The Chromium that prints PDFs: $LEDGER_CHROMIUM, else the system's. `option`: the option
    that asked for a PDF (--format pdf, or --out with a .pdf name), named in the error."""
    configured = os.environ.get(CHROMIUM_ENV)
    candidates = (configured,) if configured else CHROMIUM_CANDIDATES
    for candidate in candidates:
        found = candidate if os.path.isabs(candidate) and os.access(candidate, os.X_OK) else shutil.which(candidate)
        if found:
            return found
    raise fail("command line", option, "PDF needs Chromium: install the system's chromium package "
                                           f"(apt-get install chromium) or set {CHROMIUM_ENV} to its path")


def render(context: ReportContext, fmt: str, *, chromium: str | None = None) -> bytes:
    """The report file's bytes in one format."""
    if fmt == "csv":
        return csv_safe(risk_frame(context.risk)).to_csv(lineterminator="\n").encode("utf-8")
    if fmt == "pdf":
        return pdf_from_html(render_text(context, "pdf"), chromium or find_chromium())
    return render_text(context, fmt).encode("utf-8")


_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """A CSV cell a spreadsheet takes as text: control characters made visible, and a
    leading = + - @ (a formula) behind an apostrophe (OWASP, "CSV injection")."""
    if not isinstance(value, str):
        return value
    if value.isprintable():  # the common case: no control character, no line break to replace
        return "'" + value if value.startswith(_FORMULA_PREFIXES) else value
    text = neutralise(value.replace("\r\n", " ").replace("\r", " ").replace("\n", " "))
    return "'" + text if text.startswith(_FORMULA_PREFIXES) else text


def csv_column(values) -> list:
    """[csv_cell(v) for v in values], checked a column at a time: when every value is text, all
    of it printable and none a formula (the common case), the column is its own cells."""
    values = list(values)
    try:
        plain = "".join(values).isprintable() and not any(map(str.startswith, values,
                                                              repeat(_FORMULA_PREFIXES, len(values))))
    except TypeError:  # (a value that is not text)
        plain = False
    return values if plain else list(map(csv_cell, values))


def csv_safe(frame):
    """The frame with every label and text cell passed through `csv_cell`."""
    frame = frame.map(csv_cell)
    frame.index = frame.index.map(csv_cell)
    frame.index.name = csv_cell(frame.index.name)
    frame.columns = [csv_cell(column) for column in frame.columns]
    return frame


def render_text(context: ReportContext, fmt: str) -> str:
    """The report as text; "pdf" gives the HTML the PDF is printed from (`medium` "print")."""
    kind = {"html": "html", "pdf": "html", "md": "md", "tex": "tex"}[fmt]
    medium = "print" if fmt == "pdf" else "screen"
    return report_environment(kind).get_template(TEMPLATES[fmt]).render(report=context, medium=medium)


def pdf_from_html(html: str, chromium: str) -> bytes:
    """Print the HTML report with headless Chromium (A4 landscape, from the report's CSS).

    Runs in a thread of its own: Playwright's synchronous API refuses to run where an
    event loop already runs (a notebook, or another Playwright session)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="pdf") as pool:
        return pool.submit(_print, html, chromium).result()


# The printed area of a page, in CSS px (96 to the inch): A4 landscape less the margins of
# reports/report.css's @page (297 - 10 - 10 mm by 210 - 12 - 14 mm).
PRINTED_AREA = {"width": round((297 - 20) / 25.4 * 96), "height": int((210 - 26) / 25.4 * 96)}
# A section taller than a page flows from where the one before it ends. report.css keeps a section
# whole (break-inside: avoid: it moves to the next page rather than leave its heading or a short
# note alone), but Chromium moved a section taller than a page as well, before splitting it anyway:
# a 200-variable report's page 1 held the certificate alone, and the risk table began on page 2.
# Measured in the print layout (the page laid out at the printed width, print media) before printing.
MARK_FLOWING_SECTIONS = """height => {
  for (const section of document.querySelectorAll('body > section')) {
    if (section.getBoundingClientRect().height > height) section.classList.add('flows');
  }
}"""


def _print(html: str, chromium: str) -> bytes:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="privacy-ledger-") as directory:
        page_file = Path(directory) / "report.html"
        page_file.write_text(html, encoding="utf-8")
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
                try:
                    page = browser.new_page(viewport=PRINTED_AREA)
                    page.route("**/*", _local_only)
                    page.goto(page_file.as_uri(), wait_until="load")
                    page.emulate_media(media="print")
                    page.evaluate(MARK_FLOWING_SECTIONS, PRINTED_AREA["height"])
                    data = page.pdf(prefer_css_page_size=True, print_background=True, outline=True)
                finally:
                    browser.close()
        except PlaywrightError as exc:
            raise fail("pdf", "chromium", f"Chromium ({chromium}) could not print the report: "
                                          f"{str(exc).splitlines()[0]}") from None
        return relative_links(data, Path(directory).as_uri() + "/")


def relative_links(pdf: bytes, printed_from: str) -> bytes:
    """The PDF with its links to files beside the printed page made relative again.

    Chromium writes every link as an absolute URI, so the summarised report's link to its register
    (`<out>.register.csv`, beside the report) pointed into the temporary directory the page was
    printed from, gone once printed. A relative URI in a PDF is read against the document's own
    location (ISO 32000-1, 12.6.4.7, the URI dictionary's Base: "if no base URI is specified, such
    partial URIs shall be interpreted relative to the location of the document itself"), so the
    link holds wherever the report and its register are kept together."""
    if printed_from.encode("ascii") not in pdf:  # no such link (Chromium writes URIs as plain strings)
        return pdf
    import io

    from pypdf import PdfWriter
    from pypdf.generic import NameObject, TextStringObject

    writer = PdfWriter(clone_from=io.BytesIO(pdf))
    for page in writer.pages:
        for annotation in page.get("/Annots") or ():
            action = annotation.get_object().get("/A")
            uri = None if action is None else action.get_object().get("/URI")
            if uri is not None and str(uri).startswith(printed_from):
                action.get_object()[NameObject("/URI")] = TextStringObject(str(uri)[len(printed_from):])
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _local_only(route) -> None:
    """The report is self-contained: refuse any request but the page's own file."""
    if route.request.url.startswith(("file:", "data:", "about:")):
        route.continue_()
    else:
        route.abort()
