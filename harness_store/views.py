"""Readable markdown views of entries: `<root>/view/<scope>/<kind>/<id>.md`.

A refinement is reviewed in the editor as one diff per edit; the diff needs a real path, so the
store keeps a file per entry written (only the entries an apply touched are rewritten).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from harness_store.ids import slugify
from harness_store.models import HarnessEntry
from harness_store.paths import ensure_dir
from host_base.private_files import write_atomic

log = logging.getLogger("harness_store")


def view_path(root: Path, scope: str, kind: str, entry_id: str) -> Path:
    # Ids are slugs when we derive them, but a caller may give any string: keep it a single path part.
    """Where the markdown view of an entry lives (ids that are not one path part are slugged)."""
    safe = (
        entry_id
        if entry_id and "/" not in entry_id and entry_id not in (".", "..")
        else slugify(entry_id, "entry")
    )
    return root / "view" / scope / kind / f"{safe}.md"


def render_view(entry: HarnessEntry) -> str:
    """The markdown an editor shows for an entry (also the text of review diffs)."""
    lines = [
        f"# {entry.title}",
        "",
        f"- kind: {entry.kind}",
        f"- id: {entry.id}",
        f"- scope: {entry.scope}",
        f"- path: {entry.path}",
        f"- trust: {entry.trust}",
        f"- version: {entry.version}",
    ]
    if entry.evidence:
        lines.append(f"- evidence: {', '.join(entry.evidence)}")
    for name in ("reference", "arguments", "metadata"):
        value = getattr(entry, name)
        if value:
            lines.append(f"- {name}: {json.dumps(value, sort_keys=True, ensure_ascii=False)}")
    lines += ["", entry.content.rstrip("\n"), ""]
    return "\n".join(lines)


def write_view(root: Path, entry: HarnessEntry) -> Path:
    """Write an entry's markdown view atomically (0600); a failure is logged, never raised."""
    path = view_path(root, entry.scope, entry.kind, entry.id)
    try:
        ensure_dir(path.parent)
        # A fixed temp name: a writer killed here leaves one file that the next write reuses.
        write_atomic(path, render_view(entry), temp=path.with_name(f".{path.name}.tmp"), sync=False)
    except OSError as exc:
        # Views are a convenience for editors; a failure must not fail the apply that already saved.
        log.warning("cannot write harness view %s: %s", path, exc)
    return path


def remove_view(root: Path, entry: HarnessEntry) -> None:
    """Delete an entry's view file (a failure is logged, never raised)."""
    try:
        view_path(root, entry.scope, entry.kind, entry.id).unlink(missing_ok=True)
    except OSError as exc:
        log.warning("cannot remove harness view for %s: %s", entry.id, exc)
