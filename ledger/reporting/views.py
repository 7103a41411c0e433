"""What the CLI and the templates show: documented contexts computed from engine results.

Templates only loop and format (STYLE 7); every figure they print is computed
here or below the API (operations/table_view.py: the table view), as an epsilon
at a stated delta, with the conversion named. Unbounded
loss is shown as `∞` in text and `"inf"` in JSON, never as a number.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from fractions import Fraction
from functools import lru_cache
from importlib import resources

from ..accounting.spend import ALLOWANCE, CONVERSION_NAME
from ..accounting.risk_table import SubsetCost
from ..core.failures import neutralise
from ..core.numbers import (
    INF,
    Number,
    figure_fields,
    format_delta,
    format_number,
    is_infinite,
)
from ..core.lazy import lazy_module
from ..operations.reasons import NEUTRAL, NOT_PROTECTED, PUBLIC, figure_text, variable_reason
from ..operations.table_view import TableView

jinja2 = lazy_module("jinja2")  # imported when a template is rendered
markupsafe = lazy_module("markupsafe")  # with jinja2


def subset_json(cost: SubsetCost, delta: Fraction, why: str | None = None, allowance: Fraction = ALLOWANCE) -> dict:
    """`subset --json`; `why`: why an unbounded figure is ∞ (reasons.unbounded_reason), in
    reasons.py's words (NOT_PROTECTED when not given: an ∞ of unknown cause is an alarm)."""
    spend = cost.spend
    pure = spend.is_pure
    return {
        "subset": list(cost.subset),
        **figure_fields("epsilon", spend.epsilon(delta, allowance)),
        **figure_fields("rho", None if pure else spend.zcdp_rho()),
        **figure_fields("delta", None if pure or spend.unbounded else delta),
        "notion": spend.notion,
        "conversion": CONVERSION_NAME if spend.rho else None,
        "reason": (why or NOT_PROTECTED) if spend.unbounded else None,
        "releases": list(cost.releases),
    }


def release_json(body: dict) -> dict:
    """A release as `releases --json` prints it: the stored form (codec.release_to_dict),
    with each guarantee's epsilon, delta and rho in the figure shape (`figure_fields`)."""
    guarantees = []
    for g in body.get("guarantees", ()):
        shown = dict(g)
        for key in ("epsilon", "delta", "rho"):
            if shown.get(key) is not None:
                shown.update(figure_fields(key, Fraction(shown[key])))
        guarantees.append(shown)
    return {**body, "guarantees": guarantees}


def cell_text(value: Number) -> str:
    return format_number(value)


def text_table(view: TableView, total_label: str = "All releases") -> str:
    """Plain-text Table 1, the layout of Tan's paper plus the whole-dataset column."""
    header = ["Release", *[f"{{{name}}}" for name in view.variables], "whole dataset"]
    # A table of 10,000 releases has a million cells and a few distinct values: each value is
    # formatted once, by identity (the view holds every one alive while this runs).
    texts: dict[int, str] = {}

    def text(value: Number) -> str:
        found = texts.get(id(value))
        if found is None:
            found = texts[id(value)] = cell_text(value)
        return found

    def texts_of(values) -> list[str]:
        found = list(map(texts.get, map(id, values)))  # (over the row at C speed once its values are known)
        return [text(value) for value in values] if None in found else found

    body = [[row.release, *texts_of(row.values), text(row.dataset_wide)] for row in view.rows]
    body.append([total_label, *map(cell_text, view.total), cell_text(view.total_dataset_wide)])
    widths = [max(map(len, column)) for column in zip(header, *body)]
    line = "| " + " | ".join(f"{{:<{width}}}" for width in widths) + " |"  # (str.ljust, as one format)
    rule = "|" + "|".join("-" * (width + 2) for width in widths) + "|"
    return "\n".join([line.format(*header), rule, *(line.format(*cells) for cells in body)])


# --------------------------------------------------------------------------
# Jinja environment: templates ship with the package (reports/)
# --------------------------------------------------------------------------


def _bytecode_cache(kind: str | None = None):
    """jinja2's cache of compiled templates; `kind` (md, tex): kept apart from the HTML
    environment's, as those environments compile with other options (`finalize`)."""
    try:
        if kind is None:
            return jinja2.FileSystemBytecodeCache()
        return jinja2.FileSystemBytecodeCache(pattern=f"__jinja2_{kind}_%s.cache")
    except (OSError, RuntimeError):  # no usable temporary directory: compile each time
        return None


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_load_template),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "html.j2"), default_for_string=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        # compiled templates kept between runs (the report's took ~0.4 s to compile): in
        # jinja2's per-user directory under the temporary directory (mode 0700, its owner checked),
        # keyed by each template's source checksum, so an edited template is compiled again
        bytecode_cache=_bytecode_cache(),
    )
    env.filters["epsilon"] = format_number
    env.filters["delta"] = format_delta
    env.tests["infinite"] = is_infinite
    return env


# --------------------------------------------------------------------------
# Report filters and environments: plain functions, one per kind of figure
# --------------------------------------------------------------------------


@lru_cache(maxsize=65536)
def when_text(moment: datetime | None) -> str:
    """A time as `2024-05-01 10:00:00 UTC` (times are stored in UTC); — when unknown. Cached:
    a register prints each recording time once per release recorded with it (a file of many
    releases is recorded at one time), and strftime cost a sixth of the page's rendering."""
    if moment is None:
        return "—"
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S") + " UTC"


def param_text(value: object) -> str:
    """A mechanism or guarantee parameter: exact numbers as they are (`1/3 (≈ 0.3334)`)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Fraction):
        return _exact_text(value)
    if isinstance(value, int):
        return _exact_text(Fraction(value))
    if isinstance(value, float):
        return format_number(value) if math.isinf(value) else f"{value:.6g}"
    if isinstance(value, (tuple, list)):
        return ", ".join(param_text(item) for item in value)
    if isinstance(value, dict):
        return ", ".join(f"{key} {param_text(item)}" for key, item in value.items())
    return str(value)


@lru_cache(maxsize=65536)
def _exact_text(value: Fraction) -> str:
    return format_number(value)


def names_text(names) -> str:
    """A set of variables as `{age, sex}`."""
    return "{" + ", ".join(names) + "}"


@lru_cache(maxsize=65536, typed=True)
def bound_text(value: Number, why: str | None = None) -> str:
    """An epsilon as reports print it (reasons.figure_text): `∞ (why)` (`∞ (not protected)` when
    no reason is given), else as the command line prints it, rounded up with exact fractions
    kept (`293764/114921 (≈ 2.5562)`). Cached: a report prints few distinct values many times."""
    return figure_text(value, why)


def headroom_text(value: Number) -> str:
    """A headroom as reports print it: the command line's text, rounded down; -∞ without a bound."""
    return figure_text(value, down=True)


def limit_text(value: Number, places: int = 4) -> str:
    """A cap's limit or a change as reports print it: the command line's text (format_number)."""
    return format_number(value, places)


@lru_cache(maxsize=65536)
def guarantee_text(guarantee) -> str:
    """A guarantee as `ε 1 on {age, sex}, replace` (report.GuaranteeText). Cached: a
    register repeats the same few guarantees many times."""
    if guarantee.notion == "pure":
        value = f"ε {param_text(guarantee.epsilon)}"
    elif guarantee.notion == "approx":
        value = f"(ε {param_text(guarantee.epsilon)}, δ {format_delta(guarantee.delta)})"
    else:
        value = f"ρ {param_text(guarantee.rho)}"
    return f"{value} on {names_text(guarantee.protects)}, {guarantee.relation}"


def cells_text(cells, public=()) -> str:
    """A release's charged cells, (variable, epsilon) pairs, as `{age} 0.5; {sex} 0.5`; an ∞ says
    why (reasons.variable_reason: a public variable released exactly, or not protected)."""
    return "; ".join(f"{{{name}}} {bound_text(value, variable_reason(name, public) if is_infinite(value) else None)}"
                     for name, value in cells)


def register_line(entry) -> str:
    """A release of the register (report.RegisterEntry) as one line of text: the compact
    register of large ledgers in print. Cells of equal epsilon are listed together."""
    parts = [f"{entry.id} ({entry.status})"]
    if entry.title:
        parts.append(entry.title)
    parts.append("reads " + names_text(entry.reads))
    for g in entry.guarantees:  # short: the protected set when it is not all that is read; add-remove if so
        text = guarantee_text(g).rsplit(", ", 1)[0]
        if g.protects == entry.reads:
            text = text.rsplit(" on ", 1)[0] + " on all it reads"
        parts.append(text + (", add-remove" if g.relation == "add-remove" else ""))
    if entry.exact:
        parts.append("exact: " + names_text(entry.exact))
    if entry.pufferfish:
        parts.append("Pufferfish: " + ", ".join(entry.pufferfish))
    parts.append(entry.mechanism + "".join(f", {key} {param_text(value)}" for key, value in entry.parameters))
    if entry.family:
        parts.append(f"family {entry.family} ({entry.family_split})" + (f", part {entry.part}" if entry.part else ""))
    if entry.derived_from:
        parts.append("from " + ", ".join(entry.derived_from))
    parts.append(f"recorded {when_text(entry.recorded_at)} by {entry.recorded_by}")
    if entry.approved_by:
        parts.append(f"approved {when_text(entry.approved_at)} by {entry.approved_by}")
    if entry.published_at:
        parts.append(f"published {when_text(entry.published_at)}")
    if entry.output_digest:
        parts.append(f"output SHA-256 {entry.output_digest}")
    if entry.dataset_wide is not None:
        groups: dict = {}
        for name, value in entry.cells:
            groups.setdefault(value, []).append(name)
        if len(groups) == 1 and tuple(next(iter(groups.values()))) == entry.reads \
                and next(iter(groups)) == entry.dataset_wide:
            parts.append(f"epsilon {bound_text(entry.dataset_wide)} on each variable it reads and on the whole dataset")
        else:
            cells = [f"{bound_text(value)} on {names_text(names)}" for value, names in groups.items()]
            parts.append("epsilon " + "; ".join([*cells, f"{bound_text(entry.dataset_wide)} on the whole dataset"]))
    return " · ".join(parts)


def _html_text(value: object) -> str:
    """A value as `{{ value }}` prints it in an HTML template: `_html_finalize`, then autoescaped
    (markupsafe.escape; plain text by the same five replacements, without making a Markup)."""
    if value.__class__ is str:
        if not value.isprintable():
            value = neutralise(value)
        return (value.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;").replace("'", "&#39;")
                .replace('"', "&#34;"))
    return str(markupsafe.escape(_html_finalize(value)))


_FIGURES_SEEN: dict[int, tuple[object, str]] = {}  # id(value) -> (value, bound_text(value)), see _figure_text


def _figure_text(value) -> str:
    """bound_text(value), remembered by the value's identity: a register's cells share the few
    value objects of its table, and hashing an exact Fraction (for bound_text's cache) cost more
    than the rest of a row's cells. The value is kept beside its text, so an id is never reused
    while remembered."""
    found = _FIGURES_SEEN.get(id(value))
    if found is None or found[0] is not value:
        if len(_FIGURES_SEEN) >= 65536:
            _FIGURES_SEEN.clear()
        found = _FIGURES_SEEN[id(value)] = (value, bound_text(value))
    return found[1]


def register_row(r, sparse: bool, public) -> markupsafe.Markup:
    """A release of the HTML register (report.RegisterEntry) as its table row: the markup
    report.html.j2 wrote for it in Jinja, each value printed as the template prints one
    (`_html_text`: control characters made visible, then escaped), by the same filters.
    Written here because a register lists every release (10,000 rows at 10,000 releases)
    and Jinja's calls per value (~15 a row) took most of a page's rendering;
    a test renders the template's row and this one and compares them byte for byte. The cells
    are `cells_text`'s text, each figure by `_figure_text`."""
    e = _html_text
    parts = ['<tr><td><span class="id">', e(r.id), '</span> <span class="status release-', e(r.status), '">',
             e(r.status), "</span><br>", e(r.title), "</td><td>reads ", e(names_text(r.reads))]
    for g in r.guarantees:
        parts += ["<br>", e(guarantee_text(g))]
    if r.exact:
        exact_protected = [name for name in r.exact if name not in public]
        exact_public = [name for name in r.exact if name in public]
        if exact_protected:
            parts += ['<br><span class="tag exact">exact: ', e(names_text(exact_protected)), "</span>"]
        if exact_public:
            parts += ['<br><span class="tag">public, released exactly: ', e(names_text(exact_public)), "</span>"]
    for label in r.pufferfish:
        parts += ['<br><span class="tag">Pufferfish: ', e(label), "</span>"]
    parts += ["</td><td>", e(r.mechanism)]
    for key, value in r.parameters:
        parts += ["<br>", e(key), " ", e(param_text(value))]
    if r.output_digest:
        parts += ['<br><span class="note">output SHA-256 <code>', e(r.output_digest), "</code></span>"]
    parts.append("</td><td>")
    if r.family:
        parts += ["family ", e(r.family), " (", e(r.family_split), ")"]
        if r.part:
            parts += [", part ", e(r.part)]
    if r.derived_from:
        if r.family:
            parts.append("<br>")
        parts += ["from ", e(", ".join(map(str, r.derived_from)))]
    if not r.family and not r.derived_from:
        parts.append("—")
    parts += ["</td><td>recorded ", e(when_text(r.recorded_at)), " by ", e(r.recorded_by)]
    if r.approved_by:
        parts += ["<br>approved ", e(when_text(r.approved_at)), " by ", e(r.approved_by)]
    if r.published_at:
        parts += ["<br>published ", e(when_text(r.published_at))]
        if r.published_by:
            parts += [" by ", e(r.published_by)]
    if r.ended:
        parts += ["<br>", e(r.ended.action), " ", e(when_text(r.ended.at)), " by ", e(r.ended.by), ": ",
                  e(r.ended.reason)]
    parts.append("</td>")
    if sparse:
        cells = "; ".join([f"{{{name}}} {_figure_text(value) if name not in public else bound_text(value, PUBLIC)}"
                           for name, value in r.cells])  # (cells_text)
        parts += ['<td class="sparse-cells">', e(cells)]
        if r.dataset_wide is not None:
            if r.cells:
                parts.append("<br>")
            parts += ["whole dataset ", e(_figure_text(r.dataset_wide))]
        else:
            parts.append("not charged")
        parts.append("</td>")
    parts.append("</tr>")
    return markupsafe.Markup("".join(parts))


def report_filters() -> dict:
    return {
        # every figure as the command line prints it (format_number: exact fractions kept, else 4
        # decimals rounded up for a loss, down for a headroom), an ∞ with its reason (reasons.py)
        "exact": lru_cache(maxsize=65536, typed=True)(limit_text),
        "figure": bound_text,  # `value | figure(why)`: ∞ as "∞ (why)", "∞ (not protected)" by default
        "headroom": headroom_text,  # rounded down
        "infinity_class": infinity_class,
        "public_figure": public_figure,
        "delta": format_delta,
        "when": when_text,
        "param": param_text,
        "names": names_text,
        "short_hash": lambda digest: digest[:16],
        "guarantee": guarantee_text,
        "register_line": register_line,
        "cells": cells_text,
        "register_row": register_row,
    }


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|#])")
_TEX_SPECIAL = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&", "#": r"\#",
                "^": r"\^{}", "_": r"\_", "%": r"\%", "~": r"\~{}"}
_TEX_SYMBOLS = {"∞": r"$\infty$", "≈": r"$\approx$", "×": r"$\times$", "—": "---", "–": "--", "ε": r"$\varepsilon$",
                "δ": r"$\delta$", "ρ": r"$\rho$", "≥": r"$\geq$", "≤": r"$\leq$", "✓": r"$\checkmark$",
                "−": "-", "·": r"$\cdot$", "→": r"$\rightarrow$"}
_SUPERSCRIPTS = "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"
_SUPERSCRIPT_RUN = re.compile(f"[{_SUPERSCRIPTS}]+")


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def markdown_escape(value: object) -> str:
    """Markdown's autoescape: table pipes and emphasis characters are taken literally; a
    line break (CR, LF, CRLF) becomes a space, so a value never ends a table row; other
    control characters are made visible (failures.neutralise)."""
    text = neutralise(_LINE_BREAK.sub(" ", str(value)))
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def tex_escape(value: object) -> str:
    """LaTeX's autoescape: special characters escaped, the report's symbols as math
    (`1 × 10⁻¹⁰` becomes `1 $\\times$ 10$^{-10}$`)."""
    text = "".join(_TEX_SPECIAL.get(ch, ch) for ch in neutralise(_LINE_BREAK.sub(" ", str(value))))
    text = _SUPERSCRIPT_RUN.sub(lambda m: "$^{" + m.group(0).translate(str.maketrans(_SUPERSCRIPTS, "-0123456789"))
                                + "}$", text)
    return "".join(_TEX_SYMBOLS.get(ch, ch) for ch in text)


def public_figure(value: Number) -> str:
    """A public variable's loss: `∞ (public, released exactly)` when a release reads it without
    a guarantee, else its figure (a public variable covered by a guarantee is not released exactly)."""
    return bound_text(value, PUBLIC)


def infinity_class(why: str | None) -> str:
    """The HTML class of an ∞ cell: `public` (neutral, expected) or `unbounded` (an alarm)."""
    return "public" if why in NEUTRAL else "unbounded"


def report_environment(kind: str = "html") -> jinja2.Environment:
    """The environment reports render in: HTML autoescaped by Jinja; Markdown and LaTeX
    escaped by `finalize` (their own autoescape); StrictUndefined throughout, so a
    missing value fails loudly (STYLE 7)."""
    if kind == "html":
        env = environment()
        env.finalize = _html_finalize  # control characters made visible, then autoescaped
    else:
        escape = {"md": markdown_escape, "tex": tex_escape}[kind]
        env = jinja2.Environment(loader=jinja2.FunctionLoader(_load_template), autoescape=False,
                                 undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                                 finalize=escape, keep_trailing_newline=True,
                                 bytecode_cache=_bytecode_cache(kind))  # (as `environment`'s)
        env.filters["epsilon"] = format_number
        env.tests["infinite"] = is_infinite
    env.filters.update(report_filters())
    env.tests["alarm"] = is_alarm
    return env


def is_alarm(value: Number, why: str | None = None) -> bool:
    """An ∞ that is an alarm: unbounded, and not for a neutral reason (a public variable)."""
    return is_infinite(value) and why not in NEUTRAL


def _html_finalize(value: object) -> object:
    """Control characters made visible in plain text (Markup, numbers and dates pass through);
    then autoescaped. Called on every value a page prints (~150,000 in a 10,000-release
    register): the common case, printable text, is tested first and returned as it is."""
    if value.__class__ is str:
        return value if value.isprintable() else neutralise(value)
    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return neutralise(value)
    return value


def _load_template(name: str) -> str:
    return resources.files("ledger.reports").joinpath(name).read_text(encoding="utf-8")


def render(template: str, **context) -> str:
    return environment().get_template(template).render(**context)


def release_charge_text(release, dataset=None) -> str:
    """What a release charges the whole dataset (U = V, Tan Prop 3.1): its cost on what it
    reads, as epsilon (pure) or epsilon at the dataset's delta, the figure `table` prints in its
    whole-dataset cell; cancelled releases charge nothing."""
    from ..accounting.spend import DEFAULT_DELTA
    from ..accounting.cost_rule import release_cost
    from ..core.records import Status

    if release.status == Status.CANCELLED:
        return "none (cancelled)"
    if not release.reads:
        return "0"
    spend = release_cost(release, frozenset(release.reads))
    if spend.unbounded:
        return "∞ (exact on " + ", ".join(sorted(release.exact_variables)) + ")"
    if spend.is_pure:
        return f"ε {format_number(spend.pure)}"
    delta = (dataset.delta if dataset is not None else None) or DEFAULT_DELTA
    # the release's own charge, as `table`'s cell for it (Spend.own_epsilon: one mechanism, a rho
    # converted at the whole delta), not a composition's figure at the filter's share of delta
    allowance = dataset.allowance if dataset is not None else ALLOWANCE
    return f"ε {format_number(spend.own_epsilon(delta, allowance))} at δ {format_delta(delta)}"


def release_charge_json(release, dataset=None) -> dict:
    """`release_charge_text` in `releases --json`: `charge` in the figure shape (`figure_fields`: a
    pure epsilon, or an epsilon at `charge_delta`, the dataset's delta; "inf" when it reads a variable
    exactly; null for a cancelled release, which charges nothing) and `charge_text` as the table prints it."""
    from ..accounting.spend import DEFAULT_DELTA
    from ..accounting.cost_rule import release_cost
    from ..core.records import Status

    text = release_charge_text(release, dataset)
    if release.status == Status.CANCELLED:
        return {**figure_fields("charge", None), "charge_delta": None, "charge_text": text}
    if not release.reads:
        return {**figure_fields("charge", Fraction(0)), "charge_delta": None, "charge_text": text}
    spend = release_cost(release, frozenset(release.reads))
    if spend.unbounded or spend.is_pure:
        return {**figure_fields("charge", INF if spend.unbounded else spend.pure), "charge_delta": None,
                "charge_text": text}
    delta = (dataset.delta if dataset is not None else None) or DEFAULT_DELTA
    allowance = dataset.allowance if dataset is not None else ALLOWANCE
    return {**figure_fields("charge", spend.epsilon(delta, allowance)), **figure_fields("charge_delta", delta),
            "charge_text": text}


RELEASES_HEADER = ("id", "dataset", "status", "reads", "family", "charge", "recorded", "published")


def releases_text(releases, datasets) -> str:
    """The `releases` table: id, dataset, status, reads, family, charge, dates, with a header."""
    body = [release_cells(r, datasets) for r in releases]
    widths = releases_widths([RELEASES_HEADER, *body])
    return "\n".join(releases_line(line, widths) for line in [RELEASES_HEADER, *body])


def release_cells(release, datasets) -> list[str]:
    """One release's row of the `releases` table (a family member's family with its part)."""
    r = release
    return [r.id, r.dataset, r.status.value, ", ".join(sorted(r.reads)) or "-",
            "-" if r.family is None else f"{r.family} (part {r.part})",
            release_charge_text(r, datasets.get(r.dataset)),
            r.recorded_at.strftime("%Y-%m-%d") if r.recorded_at else "-",
            r.published_at.strftime("%Y-%m-%d") if r.published_at else "-"]


def releases_widths(lines, widths=None) -> list[int]:
    """Each column's width over `lines` (and the `widths` found before: the table a page at a time)."""
    found = list(widths or [0] * len(RELEASES_HEADER))
    for line in lines:
        found = [max(width, len(cell)) for width, cell in zip(found, line)]
    return found


def releases_line(cells, widths) -> str:
    return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip()
