"""The one exception of this package: the store cannot be used at all."""

from __future__ import annotations


class HarnessStoreError(Exception):
    """The store is unusable (permissions, lock timeout, a path that is not a directory).

    The message names the path and what to do. Refused edits are never exceptions: they are
    recorded as `applied=False` with an `error` on the result.
    """
