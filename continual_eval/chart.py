"""Line charts as standalone SVG text, with no plotting dependency.

A chart is one or more panels side by side (`columns`) or stacked, each with its own y axis, sharing
the look: light grid, labelled ticks, a legend per panel, one colour per series name across panels
(so "learning" is the same colour in the success panel and the tokens panel). The output is plain
SVG 1.1 that browsers, editors' Markdown previews and GitHub render; every label is XML-escaped.

    svg = render_svg([Panel("Checker passes", "tasks passed", [Series("learning", [(1, 3), (2, 8)])])],
                     title="Learning curve", x_label="session")
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

# Colour-blind-safe (Okabe-Ito), in the order series names are first seen.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")
FONT = "font-family='DejaVu Sans, Helvetica, Arial, sans-serif'"


@dataclass(frozen=True)
class Series:
    """One line: `(x, y)` points (drawn in x order), with markers; `dashed` for a reference line."""

    name: str
    points: Sequence[tuple[float, float]]
    color: str | None = None
    dashed: bool = False
    # Intervals drawn as whiskers: (x, low, high), e.g. a bootstrap 95% interval around each point.
    intervals: Sequence[tuple[float, float, float]] = ()


@dataclass(frozen=True)
class Panel:
    """One plot area: a title, the y axis label, its series; `y_min`/`y_max` fix the range."""

    title: str
    y_label: str
    series: Sequence[Series]
    y_min: float | None = None
    y_max: float | None = None
    # How a y tick is written (`"{:.0%}"` for a fraction); `compact` abbreviates 12000 as 12k.
    y_format: str = "compact"
    notes: Sequence[str] = field(default_factory=tuple)
    x_label: str | None = None  # this panel's own x axis label (default: the chart's)


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About `count` round tick values covering [low, high] (steps of 1, 2, 2.5 or 5 x 10^n)."""
    if not math.isfinite(low) or not math.isfinite(high):
        raise ValueError(f"tick range must be finite; got {low}..{high}")
    if high < low:
        low, high = high, low
    if high == low:
        pad = abs(low) * 0.1 or 1.0
        low, high = low - pad, high + pad
    raw = (high - low) / max(1, count)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.floor(low / step) * step
    ticks: list[float] = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    if ticks[-1] < high:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def format_value(value: float, style: str) -> str:
    """A tick label: `compact` (1.5k, 2M, 0.25), or a `str.format` pattern such as `"{:.0%}"`."""
    if style != "compact":
        return style.format(value)
    magnitude = abs(value)
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if magnitude >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}"


def _colors(panels: Sequence[Panel]) -> dict[str, str]:
    colors: dict[str, str] = {}
    for panel in panels:
        for series in panel.series:
            if series.name not in colors:
                colors[series.name] = series.color or PALETTE[len(colors) % len(PALETTE)]
    return colors


def _x_ticks(xs: Sequence[float]) -> list[float]:
    low, high = min(xs), max(xs)
    if all(float(x).is_integer() for x in xs) and high - low <= 20:
        return [float(v) for v in range(int(low), int(high) + 1)]
    return nice_ticks(low, high, 6)


def _text(x: float, y: float, body: str, *, size: int = 12, anchor: str = "middle", extra: str = "") -> str:
    return (
        f"<text x='{x:.1f}' y='{y:.1f}' font-size='{size}' text-anchor='{anchor}' {FONT} "
        f"fill='#222'{extra}>{escape(body)}</text>"
    )


def _panel_svg(
    panel: Panel,
    colors: dict[str, str],
    box: tuple[float, float, float, float],
    x_label: str,
    note_rows: int,
) -> list[str]:
    out: list[str] = []
    left, top, width, height = box
    plot_l, plot_r = left + 64, left + width - 14
    # Every panel reserves the same room for notes, so plots side by side share their baseline.
    plot_t, plot_b = top + 30, top + height - 64 - 13 * note_rows
    out.append(_text((plot_l + plot_r) / 2, top + 18, panel.title, size=14, extra=" font-weight='bold'"))
    points = [p for s in panel.series for p in s.points]
    points += [(x, v) for s in panel.series for x, low, high in s.intervals for v in (low, high)]
    if not points:
        out.append(_text((plot_l + plot_r) / 2, (plot_t + plot_b) / 2, "no data", size=12))
        return out
    xs = [float(p[0]) for p in points]
    ys = [float(p[1]) for p in points]
    if not all(math.isfinite(v) for v in xs + ys):
        raise ValueError(f"panel {panel.title!r} has a point that is not a finite number")
    x_ticks = _x_ticks(xs)
    y_low = panel.y_min if panel.y_min is not None else min(0.0, min(ys))
    y_high = panel.y_max if panel.y_max is not None else max(ys)
    y_ticks = nice_ticks(y_low, y_high, 5)
    if panel.y_min is not None:
        y_ticks = [t for t in y_ticks if t >= panel.y_min] or [panel.y_min]
    if panel.y_max is not None:
        y_ticks = [t for t in y_ticks if t <= panel.y_max] or [panel.y_max]
    x0, x1 = x_ticks[0], x_ticks[-1]
    y0 = min(y_ticks[0], y_low)
    y1 = max(y_ticks[-1], y_high)
    x_span = (x1 - x0) or 1.0
    y_span = (y1 - y0) or 1.0

    def px(x: float) -> float:
        return plot_l + (x - x0) / x_span * (plot_r - plot_l)

    def py(y: float) -> float:
        return plot_b - (y - y0) / y_span * (plot_b - plot_t)

    out.append(
        f"<rect x='{plot_l:.1f}' y='{plot_t:.1f}' width='{plot_r - plot_l:.1f}' "
        f"height='{plot_b - plot_t:.1f}' fill='#fff' stroke='#999'/>"
    )
    for tick in y_ticks:
        y = py(tick)
        out.append(f"<line x1='{plot_l:.1f}' y1='{y:.1f}' x2='{plot_r:.1f}' y2='{y:.1f}' stroke='#e4e4e4'/>")
        out.append(_text(plot_l - 6, y + 4, format_value(tick, panel.y_format), size=11, anchor="end"))
    for tick in x_ticks:
        x = px(tick)
        out.append(f"<line x1='{x:.1f}' y1='{plot_b:.1f}' x2='{x:.1f}' y2='{plot_b + 4:.1f}' stroke='#999'/>")
        out.append(_text(x, plot_b + 17, format_value(tick, "compact"), size=11))
    x_label = panel.x_label if panel.x_label is not None else x_label
    if x_label:
        out.append(_text((plot_l + plot_r) / 2, plot_b + 34, x_label, size=12))
    mid = (plot_t + plot_b) / 2
    out.append(
        _text(
            left + 14,
            mid,
            panel.y_label,
            size=12,
            extra=f" transform='rotate(-90 {left + 14:.1f} {mid:.1f})'",
        )
    )
    for series in panel.series:
        color = colors[series.name]
        ordered = sorted((float(x), float(y)) for x, y in series.points)
        if not ordered:
            continue
        dash = " stroke-dasharray='6 4'" if series.dashed else ""
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in ordered)
        out.append(f"<polyline points='{path}' fill='none' stroke='{color}' stroke-width='2.2'{dash}/>")
        for x, y in ordered:
            out.append(f"<circle cx='{px(x):.1f}' cy='{py(y):.1f}' r='3.4' fill='{color}'/>")
        for x, low, high in series.intervals:
            a, b, c = px(float(x)), py(float(low)), py(float(high))
            out.append(
                f"<path d='M{a - 4:.1f},{b:.1f}H{a + 4:.1f}M{a:.1f},{b:.1f}V{c:.1f}M{a - 4:.1f},{c:.1f}H{a + 4:.1f}' "
                f"stroke='{color}' stroke-width='1.3' fill='none' class='interval'/>"
            )
    # Legend under the axis label, one swatch per series.
    legend_x, legend_y = plot_l, plot_b + 52
    for series in panel.series:
        color = colors[series.name]
        dash = " stroke-dasharray='6 4'" if series.dashed else ""
        out.append(
            f"<line x1='{legend_x:.1f}' y1='{legend_y - 4:.1f}' x2='{legend_x + 18:.1f}' "
            f"y2='{legend_y - 4:.1f}' stroke='{color}' stroke-width='2.6'{dash}/>"
        )
        out.append(_text(legend_x + 23, legend_y, series.name, size=11, anchor="start"))
        legend_x += 32 + 7 * len(series.name)
    for index, note in enumerate(panel.notes):  # under the legend, so a note never covers a line
        out.append(
            _text(
                plot_l, legend_y + 16 + 13 * index, note, size=10, anchor="start", extra=" fill-opacity='0.7'"
            )
        )
    return out


def render_svg(
    panels: Sequence[Panel],
    *,
    title: str = "",
    subtitle: str = "",
    x_label: str = "",
    columns: int | None = None,
    panel_width: int = 420,
    panel_height: int = 300,
) -> str:
    """The whole chart as SVG text: panels in a grid of `columns` (default: all in one row)."""
    if not panels:
        raise ValueError("a chart needs at least one panel")
    columns = max(1, min(columns or len(panels), len(panels)))
    rows = math.ceil(len(panels) / columns)
    header = (24 if title else 0) + (18 if subtitle else 0) + (8 if title or subtitle else 0)
    width = columns * panel_width
    height = header + rows * panel_height
    colors = _colors(panels)
    body: list[str] = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}'>",
        f"<rect width='{width}' height='{height}' fill='#fafafa'/>",
    ]
    if title:
        body.append(_text(width / 2, 22, title, size=16, extra=" font-weight='bold'"))
    if subtitle:
        body.append(
            _text(width / 2, 22 + (18 if title else 0), subtitle, size=12, extra=" fill-opacity='0.8'")
        )
    note_rows = max(len(panel.notes) for panel in panels)
    for index, panel in enumerate(panels):
        row, col = divmod(index, columns)
        box = (col * panel_width, header + row * panel_height, panel_width, panel_height)
        body.extend(_panel_svg(panel, colors, box, x_label, note_rows))
    body.append("</svg>")
    return "\n".join(body) + "\n"
