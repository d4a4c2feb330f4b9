"""A host answer that works both with and without `await` in a cell.

The system prompt teaches `await refine.run()`, but a model that forgets the `await` must not end up
with a coroutine that silently never runs: the call is made at once (blocking on the host bridge,
which is served outside the kernel), and the answer can still be awaited.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # What the host bridge carries (JSON). Only for the type checker: a kernel may run an older
    # Python than the server, where `X | Y` between types fails at run time.
    JsonValue = str | int | float | bool | None | list["JsonValue"] | dict[str, "JsonValue"]
    JsonObject = dict[str, JsonValue]


class Answer(dict[str, "JsonValue"]):
    """A dict that may also be awaited (yielding itself)."""

    def __await__(self) -> Generator[None, None, Answer]:
        yield from ()
        return self
