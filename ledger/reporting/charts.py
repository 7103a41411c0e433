"""Charts for reports, as inline SVG written directly.

Two pictures, each from a context `report.py` computed (STYLE 7: the numbers
come from the engine; this module only draws them):
- `heat_map_svg(Pairs)`: the loss on every pair of variables, one cell per
  pair (the diagonal: the single variable), ∞ (not protected) in red, ∞ caused
  by a public variable (released exactly by design, docs/explanation/model.md#public-and-protected-variables) in grey;
- `timeline_svg(Timeline)`: cumulative epsilon per variable over time, the
  most exposed variables named, each in its own colour, width and dash pattern
  (its legend drawn alike), the rest in grey; ∞ drawn on a
  band above the finite values; caps in epsilon as dashed lines.

Why not matplotlib: for 200 variables its
`savefig` took most of a 10,000-release report's time, to write what is a few
hundred lines of SVG. The cells of the heat map are one small PNG image (a
pixel per pair, scaled up without smoothing), as matplotlib's `imshow` wrote
them; everything else is SVG elements.

Accessibility: each chart is `role="img"` with a `<title>` and a `<desc>`
(what it shows, and where the exact figures are: the table of the most exposed
pairs beside the heat map, the risk table's total row for the final values of
the timeline); labels, ticks and legends are text, so a browser can find them
and a PDF printed from the page carries them. The same context draws the same
bytes (no date, no random ids).
"""

from __future__ import annotations

import math
import struct
import zlib
from base64 import b64encode
from datetime import UTC as _UTC
from datetime import datetime, timedelta
from html import escape

import numpy as np
from markupsafe import Markup

from .chart_data import Pairs, Timeline
from ..core.numbers import format_short

UNPROTECTED = "#c0392b"  # ∞ on a protected variable: an alarm (whatever its reason, reasons.py)
PUBLIC_EXACT = "#9aa3ad"  # ∞ from a public variable, released exactly by design: neutral
SCALE = ("#f7fbff", "#9ecae1", "#3182bd", "#08306b")  # epsilon 0 .. the largest finite figure, evenly spaced
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
# each named line of the timeline also has its own dash pattern (solid first), drawn the same in
# its legend: lines that coincide (two variables with the same history) stay apart, the upper
# line's gaps showing the one under it, and the legend says which is which without colour
DASHES = ("", "8 3", "2 2", "10 3 2 3", "4 3", "1 3", "12 4", "6 2 2 2")
OTHERS = "#c3c8cf"
INK = "#1b1b1b"
MUTED = "#5b6470"
GRID = "#e6e8eb"
CAP_RANGE = 20  # a cap above this many times the largest finite figure is named, not drawn
FONT = 'font-family="DejaVu Sans, Arial, sans-serif"'


def heat_map_svg(pairs: Pairs) -> Markup:
    """Every pair of variables, coloured by epsilon; each cell labelled when the dataset is small."""
    n = len(pairs.variables)
    if n < 2:
        return Markup("")
    colour = np.asarray(pairs.colour, dtype=float)
    finite = np.isfinite(colour)
    top = float(colour[finite].max()) if finite.any() else 0.0
    # ∞ caused by a public variable (released exactly by design, docs/explanation/model.md#public-and-protected-variables) is neutral:
    # a cell is an alarm only when a protected variable of the pair is itself without a bound
    public = np.asarray([name in pairs.public for name in pairs.variables], dtype=bool)
    protected_inf = ~public & ~np.isfinite(np.diag(colour))
    neutral = ~finite & ~(protected_inf[:, None] | protected_inf[None, :]) & (public[:, None] | public[None, :])
    alarm = ~finite & ~neutral

    labels = ["{" + name + "}" for name in pairs.variables]
    step = max(1, math.ceil(n / 40))
    ticks = range(0, n, step)
    side = min(110 + 48 * n, 620)  # the matrix, in px
    cell = side / n
    # the labels as large as the room between two labelled rows allows, up to 9 px: at least 15.5 px
    # apart (40 labels on 620 px), so 9 px at any size (5 px at 200 variables was not readable once
    # the picture was scaled to the page, ~3 pt printed)
    size = min(9.0, 0.6 * cell * step)
    label_width = _text_width(max((labels[k] for k in ticks), key=len), size)
    left, top_margin = label_width + 12, 8
    bar_x = left + side + 22
    scale_top = top if top > 0 else 1.0
    scale_ticks = _nice_ticks(scale_top, 6)
    width = bar_x + 17 + max(_text_width(_tick(v), 8) for v in scale_ticks) + 18
    bottom = top_margin + side + label_width + 12
    # (an alarm whatever its reason: read without a bound, a family's move, deltas past the delta;
    # each pair's reason is in the tables, reasons.py's words)
    legend = [(UNPROTECTED, "∞ on a protected variable: an alarm (why: the tables)")] if alarm.any() else []
    if neutral.any():
        legend.append((PUBLIC_EXACT, "∞: a public variable, released exactly"))
    height = bottom + 18 * len(legend) + 4

    rgb = _colours(np.where(finite, colour, 0.0), top)
    rgb[alarm] = _hex(UNPROTECTED)
    rgb[neutral] = _hex(PUBLIC_EXACT)
    out = _open("heat-map", width, height, f"Heat map of epsilon on every pair of {n} variables",
                f"A square of {n} by {n} cells, one for each pair of variables (the diagonal: a variable "
                "alone), shaded from light (epsilon 0) to dark blue (the largest finite epsilon, "
                f"{_tick(top)}); red: ∞ on a protected variable, an alarm; grey: ∞ from a public variable, released exactly. "
                "The exact figures of the most exposed pairs are in the table beside it.")
    out.append(f'<image x="{left}" y="{top_margin}" width="{_f(side)}" height="{_f(side)}" '
               f'preserveAspectRatio="none" style="image-rendering:pixelated;image-rendering:crisp-edges" '
               f'href="data:image/png;base64,{b64encode(_png(rgb)).decode("ascii")}"/>')
    for k in ticks:
        middle = top_margin + (k + 0.5) * cell
        out.append(f'<text x="{left - 4}" y="{_f(middle)}" text-anchor="end" dominant-baseline="central" '
                   f'font-size="{_f(size)}">{escape(labels[k])}</text>')
        x = left + (k + 0.5) * cell
        y = top_margin + side + 4
        out.append(f'<text transform="translate({_f(x)} {y}) rotate(-90)" text-anchor="end" '
                   f'dominant-baseline="central" font-size="{_f(size)}">{escape(labels[k])}</text>')
    if pairs.matrix is not None:  # every figure as the tables print it (format_short: 4 decimals, up)
        font = 8 if n <= 12 else 6
        for i, row in enumerate(pairs.matrix):
            for j, value in enumerate(row):
                dark = bool(alarm[i, j]) or (top > 0 and bool(finite[i, j]) and colour[i, j] > 0.55 * top)
                text = _short(value)
                # a long figure a little smaller, down to 5 px (24 variables: "12.3457" in a 26 px cell)
                fits = max(5.0, min(font, font * 0.9 * cell / _text_width(text, font)))
                out.append(f'<text x="{_f(left + (j + 0.5) * cell)}" y="{_f(top_margin + (i + 0.5) * cell)}" '
                           f'text-anchor="middle" dominant-baseline="central" font-size="{_f(fits)}" '
                           f'fill="{"white" if dark else INK}">{escape(text)}</text>')
    out += _colour_bar(bar_x, top_margin, side, scale_ticks, scale_top, width)
    for k, (fill, text) in enumerate(legend):
        y = bottom + 18 * k
        out.append(f'<rect x="{left}" y="{y}" width="14" height="10" fill="{fill}"/>'
                   f'<text x="{left + 20}" y="{y + 5}" dominant-baseline="central" font-size="8">{escape(text)}</text>')
    out.append("</svg>")
    return Markup("".join(out))


def _colour_bar(bar_x: float, top_margin: float, side: float, scale_ticks, scale_top: float, width: float) -> list[str]:
    """The heat map's colour bar: 0 at the bottom, the largest finite figure at the top, with its title."""
    out = []
    stops = "".join(f'<stop offset="{k / (len(SCALE) - 1):.3f}" stop-color="{c}"/>' for k, c in enumerate(SCALE))
    out.append(f'<defs><linearGradient id="heat-map-scale" x1="0" y1="1" x2="0" y2="0">{stops}'
               '</linearGradient></defs>')
    out.append(f'<rect x="{_f(bar_x)}" y="{top_margin}" width="12" height="{_f(side)}" fill="url(#heat-map-scale)" '
               f'stroke="{MUTED}" stroke-width="0.5"/>')
    for value in scale_ticks:
        y = top_margin + side * (1 - value / scale_top)
        out.append(f'<line x1="{_f(bar_x + 12)}" x2="{_f(bar_x + 15)}" y1="{_f(y)}" y2="{_f(y)}" stroke="{INK}" '
                   f'stroke-width="0.6"/><text x="{_f(bar_x + 17)}" y="{_f(y)}" dominant-baseline="central" '
                   f'font-size="8">{_tick(value)}</text>')
    middle = top_margin + side / 2
    out.append(f'<text transform="translate({_f(width - 6)} {_f(middle)}) rotate(-90)" text-anchor="middle" '
               'font-size="8">epsilon on the pair (diagonal: on the variable alone)</text>')
    return out


def timeline_svg(timeline: Timeline) -> Markup:
    """Cumulative epsilon on each variable over time, by publication date; caps in epsilon
    drawn as dashed lines."""
    y = np.asarray(timeline.y, dtype=float)
    finite = np.isfinite(y)
    top = float(y[finite].max()) if finite.any() else 0.0
    far, cap_lines = _cap_levels(timeline, top)
    if cap_lines:
        top = max(top, max(limit for _, limit in cap_lines))
    ceiling = top * 1.15 if top > 0 else 1.0  # where ∞ is drawn
    y_max = ceiling * 1.12
    drawn = np.where(finite, y, ceiling)
    if timeline.axis == "time":
        x = np.asarray([_seconds(moment) for moment in timeline.x])
        end = _seconds(timeline.end)
    else:
        x = np.asarray(timeline.x, dtype=float)
        end = x[-1] + 0.6
    # from zero before the first release, and the last level carried on to the end
    x_drawn = np.concatenate([[x[0]], x, [max(end, x[-1])]])
    drawn = np.vstack([np.zeros((1, drawn.shape[1])) if not timeline.envelope else drawn[:1], drawn, drawn[-1:]])
    x_low = x[0] - 0.4 if timeline.axis == "order" else x_drawn[0]
    x_high = end if timeline.axis == "order" else x_drawn[-1]
    if x_high <= x_low:
        x_high = x_low + 1

    highlighted = list(timeline.highlighted)
    others = len(timeline.variables) - len(highlighted)
    names = ["{" + name + "}" for name in highlighted] + ([f"{others} other variable{'s' if others != 1 else ''}"]
                                                         if others else [])
    tick_values = _nice_ticks(y_max, 6)
    left = 26 + max(_text_width(_tick(v), 8) for v in tick_values) + 8  # (the axis title, rotated, sits at 10-21)
    x_ticks = _x_ticks(timeline, x, x_low, x_high)
    # a label rotated by -30 degrees, anchored at its end, reaches 0.5 of its width below the axis
    # and 0.87 of it to the left: room below for the longest, and left of the first
    rotated = [_text_width(text, 8) for _, text, turned in x_ticks if turned]
    if rotated:
        left = max(left, 0.87 * rotated[0] + 4)
    legend_width = 28 + max((_text_width(name, 8) for name in names), default=0) + 10
    plot_top, plot_bottom = 10, 280
    width, height = 760, plot_bottom + max(50, math.ceil(8 + 0.5 * max(rotated, default=0) + 7 + 22))
    plot_left, plot_right = left, width - legend_width - 10

    def px(values):
        return plot_left + (np.asarray(values, dtype=float) - x_low) / (x_high - x_low) * (plot_right - plot_left)

    def py(values):
        return plot_bottom - np.asarray(values, dtype=float) / y_max * (plot_bottom - plot_top)

    out = _open("timeline-chart", width, height, "Cumulative epsilon per variable over time",
                f"One line for each of the {len(timeline.variables)} variables: the epsilon on the variable "
                + ("by publication date" if timeline.axis == "time" else "after each release, in order")
                + (f"; named: {', '.join(names[:len(highlighted)])}" if highlighted else "")
                + ("; dashed: the caps in epsilon" if cap_lines else "")
                + (f"; caps above the range drawn: {', '.join(n for names in far.values() for n in names)}" if far else "")
                + ". Each line is the basic composition (valid for adaptive releases); the risk table's total "
                  "row shows the smallest valid figure of the accountants, which may be below it.")
    out += _timeline_axes(timeline.axis, tick_values, x_ticks, px, py, (plot_left, plot_top, plot_right, plot_bottom),
                          height)

    xs, ys = px(x_drawn), py(drawn)
    pre = timeline.envelope  # each value drawn from the previous checkpoint on (an upper envelope)
    column = {name: j for j, name in enumerate(timeline.variables)}
    grey = [j for j, name in enumerate(timeline.variables) if name not in set(highlighted)]
    if grey:
        out.append(f'<path fill="none" stroke="{OTHERS}" stroke-width="0.7" stroke-linejoin="round" d="'
                   + "".join(_steps(xs, ys[:, j], pre) for j in grey) + '"/>')
    count = len(highlighted)
    for k, name in enumerate(highlighted):
        # widest first, each drawn over the one before in its own dash: lines that coincide stay visible
        out.append(f'<path fill="none" {_line_style(k, count)} stroke-linejoin="round" '
                   f'd="{_steps(xs, ys[:, column[name]], pre)}"><title>{escape(names[k])}</title></path>')
    out += _cap_marks(cap_lines, far, py, plot_left, plot_right, plot_top)
    if (~finite).any():
        out.append(_infinity_line(timeline, finite, float(py(ceiling)), plot_left, plot_right))
    out += _timeline_legend(names, count, plot_right, plot_top)
    out.append("</g></svg>")
    return Markup("".join(out))


def _timeline_legend(names: list[str], count: int, plot_right: float, plot_top: float) -> list[str]:
    """The legend, right of the plot: each line as it is drawn (the first `count` named, then the others)."""
    out = ['<g id="legend-timeline">']
    for k, name in enumerate(names):
        y_at = plot_top + 6 + 15 * k
        style = _line_style(k, count) if k < count else f'stroke="{OTHERS}" stroke-width="0.9"'
        out.append(f'<line x1="{_f(plot_right + 8)}" x2="{_f(plot_right + 34)}" y1="{y_at}" y2="{y_at}" '
                   f'{style}/><text x="{_f(plot_right + 38)}" y="{y_at}" '
                   f'dominant-baseline="central" font-size="8">{escape(name)}</text>')
    return out


def _cap_levels(timeline: Timeline, top: float) -> tuple[dict[float, list[str]], tuple[tuple[str, float], ...]]:
    """(the caps named above the plot by limit, the caps drawn as (names, limit)): caps as lines,
    those at one limit on one line; a cap far above every curve (more than CAP_RANGE times the
    largest finite figure) is named above the plot instead of flattening it."""
    levels: dict[float, list[str]] = {}
    for name, limit in getattr(timeline, "caps", ()):
        levels.setdefault(limit, []).append(name)
    far = {limit: names for limit, names in levels.items() if top > 0 and limit > CAP_RANGE * top}
    cap_lines = tuple((", ".join(names), limit) for limit, names in sorted(levels.items()) if limit not in far)
    return far, cap_lines


def _timeline_axes(axis: str, tick_values, x_ticks, px, py, plot: tuple[float, float, float, float],
                   height: float) -> list[str]:
    """The timeline's axes: the y grid lines and ticks, the x ticks and labels, and both titles."""
    plot_left, plot_top, plot_right, plot_bottom = plot
    out = []
    for value in tick_values:  # the y axis: grid lines and ticks
        level = float(py(value))
        out.append(f'<line x1="{_f(plot_left)}" x2="{_f(plot_right)}" y1="{_f(level)}" y2="{_f(level)}" '
                   f'stroke="{GRID}" stroke-width="0.6"/><text x="{_f(plot_left - 5)}" y="{_f(level)}" '
                   f'text-anchor="end" dominant-baseline="central" font-size="8">{_tick(value)}</text>')
    for position, text, rotate in x_ticks:
        at = float(px(position))
        out.append(f'<line x1="{_f(at)}" x2="{_f(at)}" y1="{plot_bottom}" y2="{plot_bottom + 4}" stroke="{INK}" '
                   'stroke-width="0.6"/>')
        if rotate:
            out.append(f'<text transform="translate({_f(at)} {plot_bottom + 8}) rotate(-30)" text-anchor="end" '
                       f'dominant-baseline="hanging" font-size="8">{escape(text)}</text>')
        else:
            out.append(f'<text x="{_f(at)}" y="{plot_bottom + 8}" text-anchor="middle" dominant-baseline="hanging" '
                       f'font-size="8">{escape(text)}</text>')
    out.append(f'<path d="M{_f(plot_left)} {plot_top}V{plot_bottom}H{_f(plot_right)}" fill="none" stroke="{INK}" '
               'stroke-width="0.8"/>')
    out.append(f'<text x="{_f((plot_left + plot_right) / 2)}" y="{height - 8}" text-anchor="middle" font-size="9">'
               + ("published, or planned if not yet published (UTC)" if axis == "time"
                  else "releases in order") + "</text>")
    out.append(f'<text transform="translate(10 {_f((plot_top + plot_bottom) / 2)}) rotate(-90)" '
               'text-anchor="middle" dominant-baseline="hanging" font-size="9">cumulative epsilon on the variable'
               '</text>')
    return out


def _cap_marks(cap_lines, far, py, plot_left: float, plot_right: float, plot_top: float) -> list[str]:
    """Each cap drawn as a dashed line, and the caps above the range named at the top right."""
    out = []
    for name, limit in cap_lines:  # a cap bounds the loss on its subset: each variable's curve stays below it
        level = float(py(limit))
        out.append(f'<line x1="{_f(plot_left)}" x2="{_f(plot_right)}" y1="{_f(level)}" y2="{_f(level)}" '
                   f'stroke="{MUTED}" stroke-width="0.9" stroke-dasharray="4 3"/><text x="{_f(plot_left + 3)}" '
                   f'y="{_f(level - 2)}" font-size="7" fill="{MUTED}">cap {escape(name)}</text>')
    if far:
        text = "above the range drawn: " + "; ".join(f"cap {', '.join(names)} at {_tick(limit)}"
                                                     for limit, names in sorted(far.items()))
        out.append(f'<text x="{_f(plot_right)}" y="{plot_top + 2}" text-anchor="end" dominant-baseline="hanging" '
                   f'font-size="7" fill="{MUTED}">{escape(text)}</text>')
    return out


def _infinity_line(timeline: Timeline, finite, level: float, plot_left: float, plot_right: float) -> str:
    """The level where ∞ is drawn: an alarm when a protected variable reaches it, else neutral."""
    public = np.asarray([name in timeline.public for name in timeline.variables], dtype=bool)
    alarm = bool((~finite[:, ~public]).any())
    line_colour = UNPROTECTED if alarm else PUBLIC_EXACT
    text = "∞ on a protected variable" if alarm else "∞ public variables, released exactly"
    return (f'<line x1="{_f(plot_left)}" x2="{_f(plot_right)}" y1="{_f(level)}" y2="{_f(level)}" '
            f'stroke="{line_colour}" stroke-width="0.8" stroke-dasharray="5 3"/>'
            f'<rect x="{_f(plot_left + 3)}" y="{_f(level - 12)}" width="{_f(_text_width(text, 8) + 4)}" '
            f'height="11" fill="white" fill-opacity="0.85"/><text x="{_f(plot_left + 5)}" y="{_f(level - 3)}" '
            f'font-size="8" fill="{line_colour}">{text}</text>')


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


def _line_style(k: int, count: int) -> str:
    """The stroke of the k-th of `count` named timeline lines, in the plot and in its legend:
    its colour, its width (the first widest, each drawn over the one before) and its dashes."""
    dash = DASHES[k % len(DASHES)]
    return (f'stroke="{PALETTE[k % len(PALETTE)]}" stroke-width="{1.4 + 0.7 * (count - 1 - k):.1f}"'
            + (f' stroke-dasharray="{dash}"' if dash else ""))


def _open(chart_id: str, width: float, height: float, title: str, description: str) -> list[str]:
    return [f'<svg id="{chart_id}" class="chart" role="img" aria-labelledby="{chart_id}-title {chart_id}-desc" '
            f'xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_f(width)} {_f(height)}" width="{_f(width)}" '
            f'height="{_f(height)}" {FONT} fill="{INK}"><title id="{chart_id}-title">{escape(title)}</title>'
            f'<desc id="{chart_id}-desc">{escape(description)}</desc>']


def _f(value: float) -> str:
    """A coordinate: one decimal, no trailing zero."""
    text = f"{float(value):.1f}"
    return text[:-2] if text.endswith(".0") else text


def _text_width(text: str, size: float) -> float:
    """About how wide a line of text is, in px (DejaVu Sans averages ~0.6 em a character)."""
    return 0.62 * size * len(text)


def _hex(colour: str) -> np.ndarray:
    return np.asarray([int(colour[k:k + 2], 16) for k in (1, 3, 5)], dtype=np.uint8)


def _colours(values: np.ndarray, top: float) -> np.ndarray:
    """RGB for each value: SCALE interpolated linearly from 0 to `top` (one colour when `top` is 0)."""
    stops = np.asarray([_hex(c) for c in SCALE], dtype=float)
    position = np.clip(values / top, 0.0, 1.0) * (len(SCALE) - 1) if top > 0 else np.zeros(values.shape)
    low = np.minimum(position.astype(int), len(SCALE) - 2)
    fraction = (position - low)[..., None]
    return np.rint(stops[low] * (1 - fraction) + stops[low + 1] * fraction).astype(np.uint8)


def _png(rgb: np.ndarray) -> bytes:
    """An RGB image (rows x columns x 3, uint8) as PNG bytes (ISO/IEC 15948: filter 0 on every row)."""
    height, width = rgb.shape[:2]
    raw = np.concatenate([np.zeros((height, 1), dtype=np.uint8), rgb.reshape(height, width * 3)], axis=1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw.tobytes(), 9))
            + chunk(b"IEND", b""))


def _nice_ticks(high: float, most: int) -> list[float]:
    """Round tick values from 0 to at most `high`, at most `most` + 1 of them (1, 2, 2.5 or 5 x 10^k apart)."""
    if not high > 0 or not math.isfinite(high):
        return [0.0]
    raw = high / most
    power = 10 ** math.floor(math.log10(raw))
    spacing = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    count = int(math.floor(high / spacing + 1e-9))
    return [round(k * spacing, 12) for k in range(count + 1)]


def _tick(value: float) -> str:
    return f"{value:.6g}"


def _steps(xs: np.ndarray, ys: np.ndarray, pre: bool) -> str:
    """A step line through the points: level from each point to the next (post), or from the
    previous point to each (pre: each value drawn from the checkpoint before it)."""
    parts = [f"M{_f(xs[0])} {_f(ys[0])}"]
    for k in range(1, len(xs)):
        if pre:
            parts.append(f"V{_f(ys[k])}H{_f(xs[k])}")
        else:
            parts.append(f"H{_f(xs[k])}V{_f(ys[k])}")
    return "".join(parts)


def _seconds(moment: datetime) -> float:
    return moment.timestamp()


def _x_ticks(timeline: Timeline, x: np.ndarray, low: float, high: float) -> list[tuple[float, str, bool]]:
    """(position, label, rotated) of the x axis ticks: dates by a round step, or release ordinals
    (each release named when there are at most 24)."""
    if timeline.axis == "order":
        if len(timeline.labels) <= 24 and timeline.labels:
            return [(float(p), label, True) for p, label in zip(x, timeline.labels)]
        return [(v, f"{int(v)}", False) for v in _nice_ticks(high, 8) if v >= low and v == int(v)]
    start, stop = datetime.fromtimestamp(low, _UTC), datetime.fromtimestamp(high, _UTC)
    days = (stop - start).total_seconds() / 86_400
    for months in (1, 2, 3, 6, 12, 24, 60):  # the first month step giving at most 10 ticks
        if days / (30.4 * months) <= 10:
            break
    if days < 2:  # within a day or two (every event on one day): hours or minutes, the first dated
        span = max(high - low, 0.0)
        step = next((s for s in (60, 300, 600, 1800, 3600, 7200, 10800, 21600, 43200) if span / s <= 8), 86_400)
        first = math.ceil(low / step) * step
        moments = [datetime.fromtimestamp(first + step * k, _UTC) for k in range(int((high - first) // step) + 1)]
        if not moments:  # (a span shorter than a minute) its two ends
            moments = [start] + ([stop] if stop != start else [])
        return [(m.timestamp(), m.strftime("%Y-%m-%d %H:%M" if k == 0 else "%H:%M"), False)
                for k, m in enumerate(moments)]
    if days < 60:  # a short span: days
        spacing = max(1, math.ceil(days / 8))
        first = datetime(start.year, start.month, start.day, tzinfo=_UTC) + timedelta(days=1)
        moments = [first + timedelta(days=spacing * k) for k in range(int(days // spacing) + 1)]
        return [(m.timestamp(), m.strftime("%Y-%m-%d"), False) for m in moments if m.timestamp() <= high]
    ticks = []
    year, month = start.year, start.month + 1
    while True:
        year, month = year + (month - 1) // 12, (month - 1) % 12 + 1
        moment = datetime(year, month, 1, tzinfo=_UTC)
        if moment.timestamp() > high:
            break
        if (year * 12 + month - 1) % months == 0:
            ticks.append((moment.timestamp(), moment.strftime("%Y" if months % 12 == 0 else "%Y-%m"), False))
        month += 1
    return ticks


def _short(value) -> str:
    """A heat-map label: the figure as the tables beside it print it (format_short: the precision
    rule of format_number, 4 decimals rounded up, exact decimals kept; a fraction's rounded-up
    decimal alone, as a cell has no room for `n/d (≈ x)`), ∞ as ∞."""
    return format_short(value)

