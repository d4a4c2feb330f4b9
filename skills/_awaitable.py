"""A host answer that works both with and without `await` in a cell.

The system prompt teaches `await refine.run()`, but a model that forgets the `await` must not end up
with a coroutine that silently never runs: the call is made at once (blocking on the host bridge,
which is served outside the kernel), and the answer can still be awaited.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any


class Answer(dict[str, Any]):
    """A dict that may also be awaited (yielding itself)."""

    def __await__(self) -> Generator[Any, None, Answer]:
        yield from ()
        return self
