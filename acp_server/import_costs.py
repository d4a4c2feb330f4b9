"""Optional imports this process never needs and cannot afford.

`jsonschema` (imported by `jsonrpcserver` at its own import, and by the MCP SDK) loads every format
checker backend it finds installed. When `rfc3987-syntax` is installed (Jupyter's packages pull it in
through `jsonschema[format-nongpl]`), importing it compiles some 35 Lark Earley grammars at module
scope: measured here 1.3-1.9 s of CPU per process, against 0.15 s for the rest of `jsonrpcserver`
(python-jsonschema/jsonschema#1428). That was most of a server's CPU in a short session, and every
editor launch paid it. The server validates no `iri`/`iri-reference` formats (jsonrpcserver's request
schema has none; MCP tool schemas are validated without a format checker), so the backend is kept
out: jsonschema treats a failed optional import as "checker not available".
"""

from __future__ import annotations

import sys

__all__ = ["skip_unused_heavy_imports"]

_NEVER_NEEDED = ("rfc3987_syntax",)


def skip_unused_heavy_imports() -> None:
    """Make the optional backends above unimportable in this process (before anything imports jsonschema).

    A `None` entry in `sys.modules` makes `import` raise ImportError; a module already imported
    (someone needed it first) is left alone.
    """
    for name in _NEVER_NEEDED:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]
