"""Small asyncio helpers for cleanup that must run even in a cancelled task."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

log = logging.getLogger(__name__)


async def shielded(awaitable: Awaitable[Any], timeout: float) -> None:
    """Await cleanup from a (possibly cancelled) task: shielded from the cancel, bounded, never raising.

    A cancelled turn still has to close its HTTP stream and interrupt its cell, but the turn must
    answer `cancelled` within 1 s, so the cleanup gets a short budget and then runs on unobserved.
    """
    task = asyncio.ensure_future(awaitable)
    try:
        await asyncio.wait_for(asyncio.shield(task), timeout)
    except (asyncio.CancelledError, TimeoutError):
        pass
    except Exception:
        log.exception("cleanup after cancel failed")
