"""Server and tool names made into Python identifiers (`mcp.<server>.<tool>` in the kernel).

Computed on the host so the prompt, `mcp.tools()` and attribute access agree on one spelling.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable

_NOT_WORD = re.compile(r"\W+")


def identifier(name: str) -> str:
    """`my-server.v2` -> `my_server_v2`; a leading digit gets `_`, a keyword a trailing `_`."""
    ident = _NOT_WORD.sub("_", name).strip("_") or "_"
    if ident[0].isdigit():
        ident = "_" + ident
    if keyword.iskeyword(ident):
        ident += "_"
    return ident


def identifiers(names: Iterable[str], reserved: Iterable[str] = ()) -> dict[str, str]:
    """name -> unique identifier, in order; a clash gets `_2`, `_3`, ..."""
    taken = set(reserved)
    result: dict[str, str] = {}
    for name in names:
        base = identifier(name)
        ident, n = base, 2
        while ident in taken:
            ident, n = f"{base}_{n}", n + 1
        taken.add(ident)
        result[name] = ident
    return result
