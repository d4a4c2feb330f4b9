"""The unstable `usage` of a `session/prompt` response: the tokens of the turn's model requests.

A turn's `UsageReport`s carry the session's running totals, so each request's share is the change
from the report before it (the first from the totals the turn started with). An endpoint that
reports no usage (llama.cpp streams) leaves the turn with no report, and the response with no
`usage`, rather than zeros that would read as "free".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from acp_server.protocol import frames

if TYPE_CHECKING:
    from agent_core.events import UsageReport
    from agent_core.model_events import Usage


def _totals(usage: Usage | UsageReport) -> list[int]:
    return [usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens]


class TurnUsage:
    """Sums one turn's requests from the reports it streams."""

    def __init__(self, before: Usage) -> None:
        self._last = _totals(before)
        self._sum = [0, 0, 0, 0]
        self.reported = False  # at least one request of the turn reported usage

    def add(self, report: UsageReport) -> None:
        now = _totals(report)
        # max(0, ...): a rewind or reset between two reports must not count negative tokens.
        for i, (n, last) in enumerate(zip(now, self._last, strict=True)):
            self._sum[i] += max(0, n - last)
        self._last = now
        self.reported = True

    def frame(self) -> frames.Frame | None:
        """The response's `usage`, or None when no request reported any."""
        if not self.reported:
            return None
        inp, out, cache_read, cache_write = self._sum
        return frames.turn_usage(inp, out, cache_read, cache_write)
