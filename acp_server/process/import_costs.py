"""Optional imports this process never needs and cannot afford.

`jsonschema` (imported by `jsonrpcserver` at its own import, and by the MCP SDK) loads every format
checker backend it finds installed. When `rfc3987-syntax` is installed (Jupyter's packages pull it in
through `jsonschema[format-nongpl]`), importing it compiles some 35 Lark Earley grammars at module
scope: measured here 1.3-1.9 s of CPU per process, against 0.15 s for the rest of `jsonrpcserver`
(python-jsonschema/jsonschema#1428). That was most of a server's CPU in a short session, and every
editor launch paid it. The server validates no `iri`/`iri-reference` formats (jsonrpcserver's request
schema has none; MCP tool schemas are validated without a format checker), so the backend is kept
out: jsonschema treats a failed optional import as "checker not available".

`acp.schema` declares its models with `use_attribute_docstrings`, so pydantic (on Python < 3.13) walks
the stack and calls `inspect.getmodule` for each of its ~400 classes to read the docstrings under each
field into the field's `description`: about a third of that module's import (measured here 0.65 s ->
0.40 s), paid by every server before its first request after `session/new` is served. Those
descriptions only reach a JSON Schema the server never generates (it validates, nothing more), so
they are skipped for that module's classes and for no other.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["skip_unused_heavy_imports", "without_field_docstrings"]

_NEVER_NEEDED = ("rfc3987_syntax",)


def skip_unused_heavy_imports() -> None:
    """Make the optional backends above unimportable in this process (before anything imports jsonschema).

    A `None` entry in `sys.modules` makes `import` raise ImportError; a module already imported
    (someone needed it first) is left alone.
    """
    for name in _NEVER_NEEDED:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]


@contextlib.contextmanager
def without_field_docstrings(module: str) -> Iterator[None]:
    """While this block runs, pydantic models defined in `module` get no docstring descriptions.

    A wrapper on pydantic's (private) docstring step that passes every other class through, so a
    model another thread defines meanwhile keeps its descriptions; where that step is not found
    (another pydantic), nothing changes.
    """
    try:
        from pydantic._internal import _fields
    except ImportError:
        yield
        return
    original = getattr(_fields, "_update_fields_from_docstrings", None)
    if original is None:
        yield
        return

    def update(cls: type[Any], fields: Any, *args: Any, **kwargs: Any) -> None:
        if getattr(cls, "__module__", None) != module:
            original(cls, fields, *args, **kwargs)

    _fields._update_fields_from_docstrings = update
    try:
        yield
    finally:
        _fields._update_fields_from_docstrings = original
