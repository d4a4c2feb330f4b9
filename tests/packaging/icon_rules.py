"""The ACP registry's rules for an agent's `icon.svg`, as checks that return what is wrong.

The registry builds its index only from icons that pass these (its build script, in
agentclientprotocol/registry): well-formed SVG with an `<svg>` root and no XML comments (icons are
embedded in MDX pages, where a comment breaks the page), square, 16x16 (from `width`/`height`, else
the `viewBox`), monochrome: every fill and stroke — attribute, inline style or `<style>` rule — is
`currentColor`, `none` or `inherit`, and at least one is `currentColor`, so the client's theme colours it.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

SIZE = 16
NEUTRAL = {"none", "inherit"}
_CSS_PAINT = re.compile(r"\b(fill|stroke)\s*:\s*([^;}\s]+)", re.IGNORECASE)


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    match = re.fullmatch(r"\s*([0-9.]+)\s*(px)?\s*", text)
    return float(match.group(1)) if match else None


def _size(root: ET.Element) -> tuple[float, float] | None:
    width, height = _number(root.get("width")), _number(root.get("height"))
    if width is not None and height is not None:
        return width, height
    parts = (root.get("viewBox") or "").replace(",", " ").split()
    if len(parts) == 4:
        try:
            return float(parts[2]), float(parts[3])
        except ValueError:
            return None
    return None


def _paints(root: ET.Element) -> list[tuple[str, str]]:
    """Every (property, value) that paints: fill/stroke attributes, inline styles, `<style>` rules."""
    found: list[tuple[str, str]] = []
    for element in root.iter():
        for prop in ("fill", "stroke"):
            if element.get(prop) is not None:
                found.append((prop, element.get(prop, "").strip()))
        found += [(p.lower(), v.strip()) for p, v in _CSS_PAINT.findall(element.get("style") or "")]
        if _local(element.tag) == "style" and element.text:
            found += [(p.lower(), v.strip()) for p, v in _CSS_PAINT.findall(element.text)]
    return found


def icon_problems(svg_text: str) -> list[str]:
    """What keeps `svg_text` out of the registry (empty: it passes)."""
    problems: list[str] = []
    if "<!--" in svg_text:
        problems.append("contains an XML comment")
    try:
        root = ET.fromstring(svg_text)
    except ET.ParseError as exc:
        return [*problems, f"not well-formed XML: {exc}"]
    if _local(root.tag) != "svg":
        return [*problems, f"the root element is <{_local(root.tag)}>, not <svg>"]
    size = _size(root)
    if size is None:
        problems.append("no width/height and no viewBox")
    else:
        width, height = size
        if width != height:
            problems.append(f"not square: {width:g}x{height:g}")
        if (width, height) != (SIZE, SIZE):
            problems.append(f"not {SIZE}x{SIZE}: {width:g}x{height:g}")
    paints = _paints(root)
    for prop, value in paints:
        if value.lower() != "currentcolor" and value.lower() not in NEUTRAL:
            problems.append(f"hard-coded {prop} {value!r} (use currentColor or none)")
    if not any(value.lower() == "currentcolor" for _, value in paints):
        problems.append("no fill or stroke uses currentColor")
    return problems
