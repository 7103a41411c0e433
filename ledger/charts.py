"""Charts for reports, as inline SVG drawn by matplotlib (issue 4).

Two pictures, each from a context `report.py` computed (STYLE 7: the numbers
come from the engine; this module only draws them):
- `heat_map_svg(Pairs)`: the loss on every pair of variables, one cell per
  pair (the diagonal: the single variable), ∞ (not protected) in red;
- `timeline_svg(Timeline)`: cumulative epsilon per variable over time, the
  most exposed variables in colour and named, the rest in grey; ∞ drawn on a
  band above the finite values.

The SVG keeps its text as text (svg.fonttype "none"), so a browser can find
it and a PDF made from the page carries it; ids are salted with a constant and
the date is left out, so the same context draws the same bytes.
"""

from __future__ import annotations

import io
import re

import matplotlib
import matplotlib.dates as mdates
import numpy as np
from markupsafe import Markup
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.colors import LinearSegmentedColormap, ListedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from .numbers import round_up
from .chart_data import Pairs, Timeline


def _subplots(figsize):
    """A figure and its axes without pyplot (no global state, and a faster import)."""
    fig = Figure(figsize=figsize)
    FigureCanvasSVG(fig)
    return fig, fig.add_subplot()

UNPROTECTED = "#c0392b"  # ∞: not protected
PUBLIC_EXACT = "#9aa3ad"  # ∞ from a public variable, released exactly by design: neutral
SCALE = LinearSegmentedColormap.from_list("loss", ["#f7fbff", "#9ecae1", "#3182bd", "#08306b"])
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
STYLE = {
    # names and titles are text, never math or TeX: `$\notacommand$` is drawn as written
    "text.usetex": False,
    "text.parse_math": False,
    "svg.fonttype": "none",
    "svg.hashsalt": "privacy-ledger",
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def heat_map_svg(pairs: Pairs) -> Markup:
    """Every pair of variables, coloured by epsilon; each cell labelled when the dataset is small."""
    n = len(pairs.variables)
    if n < 2:
        return Markup("")
    colour = pairs.colour
    finite = np.isfinite(colour)
    top = float(colour[finite].max()) if finite.any() else 0.0
    labels = ["{" + name + "}" for name in pairs.variables]
    with matplotlib.rc_context(STYLE):
        side = min(2.6 + 0.5 * n, 9.0)
        fig, ax = _subplots((side + 1.6, side))
        scale = SCALE.with_extremes(bad=UNPROTECTED)
        image = ax.imshow(np.ma.masked_invalid(np.where(finite, colour, np.nan)), cmap=scale, vmin=0,
                          vmax=top if top > 0 else 1, interpolation="none", aspect="equal")
        # ∞ caused by a public variable (released exactly by design, DESIGN 2.11) is neutral:
        # a cell is an alarm only when a protected variable of the pair is itself finite-less
        public = np.asarray([name in pairs.public for name in pairs.variables], dtype=bool)
        alone = np.diag(colour)
        protected_inf = ~public & ~np.isfinite(alone)
        neutral = ~finite & ~(protected_inf[:, None] | protected_inf[None, :]) & (public[:, None] | public[None, :])
        if neutral.any():
            ax.imshow(np.ma.masked_where(~neutral, np.ones_like(colour)), cmap=ListedColormap([PUBLIC_EXACT]),
                      vmin=0, vmax=1, interpolation="none", aspect="equal")
        step = max(1, int(np.ceil(n / 40)))
        ticks = np.arange(0, n, step)
        fontsize = 9 if n <= 12 else (7 if n <= 40 else 5)
        ax.set_xticks(ticks, [labels[k] for k in ticks], rotation=90, fontsize=fontsize)
        ax.set_yticks(ticks, [labels[k] for k in ticks], fontsize=fontsize)
        ax.spines[:].set_visible(False)
        if pairs.matrix is not None:
            for i, row in enumerate(pairs.matrix):
                for j, value in enumerate(row):
                    dark = (not finite[i, j] and not neutral[i, j]) or (top > 0 and colour[i, j] > 0.55 * top)
                    ax.text(j, i, _short(value), ha="center", va="center", fontsize=8 if n <= 12 else 6,
                            color="white" if dark else "#1b1b1b")
        bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
        bar.set_label("epsilon on the pair (diagonal: on the variable alone)")
        legend = []
        if (~finite & ~neutral).any():
            legend.append(Patch(color=UNPROTECTED, label="∞: not protected"))
        if neutral.any():
            legend.append(Patch(color=PUBLIC_EXACT, label="∞: a public variable, released exactly"))
        if legend:
            ax.legend(handles=legend, loc="upper left",
                      bbox_to_anchor=(0, -0.02 - 0.012 * max(len(max(labels, key=len)), 4)), frameon=False,
                      fontsize=8)
        return _svg(fig, "heat-map", f"Heat map of epsilon on every pair of {n} variables")


def timeline_svg(timeline: Timeline) -> Markup:
    """Cumulative epsilon on each variable over time, by publication date; caps in epsilon
    drawn as dashed lines."""
    y = timeline.y
    finite = np.isfinite(y)
    top = float(y[finite].max()) if finite.any() else 0.0
    cap_lines = getattr(timeline, "caps", ())
    if cap_lines:
        top = max(top, max(limit for _, limit in cap_lines))
    ceiling = top * 1.15 if top > 0 else 1.0  # where ∞ is drawn
    drawn = np.where(finite, y, ceiling)
    if timeline.axis == "time":
        x = mdates.date2num(list(timeline.x))
        end = mdates.date2num(timeline.end)
    else:
        x = np.asarray(timeline.x, dtype=float)
        end = x[-1] + 0.6
    # from zero before the first release, and the last level carried on to the end
    steps = "steps-pre" if timeline.envelope else "steps-post"
    x_drawn = np.concatenate([[x[0]], x, [max(end, x[-1])]])
    drawn = np.vstack([np.zeros((1, drawn.shape[1])) if not timeline.envelope else drawn[:1], drawn, drawn[-1:]])
    highlighted = set(timeline.highlighted)
    with matplotlib.rc_context(STYLE):
        fig, ax = _subplots((10.5, 4.4))
        for j, name in enumerate(timeline.variables):
            if name not in highlighted:
                ax.plot(x_drawn, drawn[:, j], drawstyle=steps, color="#c3c8cf", linewidth=0.7, zorder=1)
        count = len(timeline.highlighted)
        for k, name in enumerate(timeline.highlighted):
            j = timeline.variables.index(name)
            # widest first, each drawn over the one before: lines that coincide stay visible
            ax.plot(x_drawn, drawn[:, j], drawstyle=steps, color=PALETTE[k % len(PALETTE)],
                    linewidth=1.4 + 0.7 * (count - 1 - k), label="{" + name + "}", zorder=3 + k)
        for name, limit in cap_lines:  # a cap bounds the loss on its subset: each variable's curve stays below it
            ax.axhline(limit, color="#5b6470", linestyle=(0, (4, 3)), linewidth=0.9, zorder=2)
            ax.text(0.0, limit, f" cap {name} ", transform=ax.get_yaxis_transform(), va="bottom", ha="left",
                    color="#5b6470", fontsize=7, usetex=False, parse_math=False)
        if (~finite).any():
            public = np.asarray([name in timeline.public for name in timeline.variables], dtype=bool)
            alarm = bool((~finite[:, ~public]).any())
            line_colour = UNPROTECTED if alarm else PUBLIC_EXACT
            ax.axhline(ceiling, color=line_colour, linestyle="--", linewidth=0.8, zorder=2)
            # inside the axes, above the line, on the left: the legend (right of the axes) never covers it
            ax.text(0.005, ceiling, "∞ not protected" if alarm else "∞ public variables, released exactly",
                    transform=ax.get_yaxis_transform(), va="bottom",
                    ha="left", color=line_colour, fontsize=8, zorder=10,
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 1, "alpha": 0.85})
        ax.set_ylim(0, ceiling * 1.12)
        ax.set_ylabel("cumulative epsilon on the variable")
        if timeline.axis == "time":
            locator = mdates.AutoDateLocator()
            ax.xaxis.set_major_locator(locator)
            ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
            ax.set_xlabel("published, or planned if not yet published (UTC)")
        else:
            ax.set_xlabel("releases in order")
            if len(timeline.labels) <= 24:
                ax.set_xticks(x, timeline.labels, rotation=30, ha="right")
        if timeline.axis == "order":
            ax.set_xlim(x[0] - 0.4, end)
        others = len(timeline.variables) - len(timeline.highlighted)
        handles, names = ax.get_legend_handles_labels()
        if others:
            handles.append(Line2D([], [], color="#c3c8cf", linewidth=0.7))
            names.append(f"{others} other variable{'s' if others != 1 else ''}")
        if handles:
            ax.legend(handles, names, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False, fontsize=8)
        ax.grid(axis="y", color="#e6e8eb", linewidth=0.6)
        fig.tight_layout()
        return _svg(fig, "timeline-chart", "Cumulative epsilon per variable over time")


def _short(value) -> str:
    """A heat-map label: the figure rounded up to 2 decimals (a bound), ∞ as ∞."""
    if isinstance(value, float) and np.isinf(value):
        return "∞"
    text = format(round_up(value, 2), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _svg(fig, chart_id: str, label: str) -> Markup:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]  # drop the XML declaration and doctype: the SVG is inline
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, count=1, flags=re.S)
    text = text.replace("<svg ", f'<svg id="{chart_id}" class="chart" role="img" aria-label="{label}" ', 1)
    return Markup(text)
