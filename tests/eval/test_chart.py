"""The SVG line chart: valid XML, one line per series, scaled into the plot, labels escaped."""

from __future__ import annotations

import itertools
import math
import xml.etree.ElementTree as ET

import pytest

from continual_eval.chart import Panel, Series, format_value, nice_ticks, render_svg

NS = "{http://www.w3.org/2000/svg}"


def _chart() -> ET.Element:
    svg = render_svg(
        [
            Panel(
                "Passes", "tasks", [Series("learning", [(1, 1), (2, 8)]), Series("frozen", [(1, 1), (2, 1)])]
            ),
            Panel("Tokens", "tokens", [Series("learning", [(1, 900), (2, 300)])]),
        ],
        title="a <title> & more",
        x_label="session",
    )
    return ET.fromstring(svg)


def test_chart_is_valid_svg_with_one_polyline_per_series_and_escaped_title() -> None:
    root = _chart()
    assert root.tag == f"{NS}svg"
    assert len(root.findall(f"{NS}polyline")) == 3
    texts = [t.text for t in root.iter(f"{NS}text")]
    assert "a <title> & more" in texts
    assert {"learning", "frozen"} <= set(texts)


def test_a_series_name_keeps_its_colour_across_panels() -> None:
    lines = _chart().findall(f"{NS}polyline")
    assert lines[0].get("stroke") == lines[2].get("stroke") != lines[1].get("stroke")


def test_higher_values_are_drawn_higher_inside_the_plot() -> None:
    learning = _chart().findall(f"{NS}polyline")[0].get("points", "").split()
    (x1, y1), (x2, y2) = (tuple(map(float, p.split(","))) for p in learning)
    assert x2 > x1
    assert y2 < y1  # SVG y grows downwards: 8 passes sit above 1


def test_nice_ticks_cover_the_range_with_round_steps() -> None:
    ticks = nice_ticks(0, 23_900)
    assert ticks[0] <= 0 and ticks[-1] >= 23_900
    steps = {round(b - a, 6) for a, b in itertools.pairwise(ticks)}
    assert steps == {5000.0}
    flat = nice_ticks(3, 3)  # a flat line still gets a range around it
    assert flat[0] < 3 < flat[-1]


def test_tick_labels_are_compact() -> None:
    assert format_value(12_000, "compact") == "12k"
    assert format_value(0.25, "{:.0%}") == "25%"


def test_a_point_that_is_not_a_number_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="not a finite number"):
        render_svg([Panel("p", "y", [Series("s", [(1, math.nan)])])])
    with pytest.raises(ValueError, match="at least one panel"):
        render_svg([])


def test_intervals_are_drawn_as_whiskers_and_widen_the_axis_to_hold_them() -> None:
    root = ET.fromstring(
        render_svg([Panel("Requests", "requests", [Series("learning", [(1, 5)], intervals=[(1, 2, 30)])])])
    )
    (whisker,) = [p for p in root.iter(f"{NS}path") if p.get("class") == "interval"]
    ticks = [float(t.text or "nan") for t in root.iter(f"{NS}text") if (t.text or "").isdigit()]
    assert max(ticks) >= 30  # the axis reaches the interval's top, not only the point
    assert whisker.get("d", "").count("M") == 3  # a bar and two caps
