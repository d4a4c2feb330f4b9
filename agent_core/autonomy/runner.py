"""Run one gate as a real process in the session's cwd (never in the kernel).

The gate gets its own process group so that a timeout or a cancel kills everything it started (a
test runner's workers included), the project's environment less the server's secrets, and a bounded
output: the first and last parts are kept, the middle is counted. Output streams to `on_output` as it
arrives so the editor's card is live.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from agent_core.autonomy.gates import Gate
from host_base.process_groups import kill_group
from kernel_bridge import reaper, workspace_launch
from kernel_bridge.errors import KernelBridgeError

__all__ = ["BoundedText", "GateResult", "run_gate"]

# The gate runs under kernel_bridge's group watch script, which leads the gate's process group: if the
# server dies without cleaning up (SIGKILL), the watch sees its parent change and kills the whole
# group, so no test run outlives the server. (An orderly exit kills tracked groups through
# kernel_bridge's reaper.) Its exit code is the shell's, 128+N for a death by signal N.
HEAD_CHARS = 4_000
TAIL_CHARS = 12_000
KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL of the gate's process group
_READ = 65_536


@dataclass(frozen=True)
class GateResult:
    command: str
    exit_code: int | None  # None when it never exited by itself (timeout, cancel, failed to start)
    output: str  # bounded: head + "[... N characters omitted ...]" + tail
    duration: float
    timed_out: bool = False
    error: str | None = None  # could not start (no shell, bad cwd)

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    def summary(self) -> str:
        if self.error:
            return f"could not run: {self.error}"
        if self.timed_out:
            return f"timed out after {self.duration:.0f} s"
        return "passed" if self.passed else f"failed (exit code {self.exit_code})"


class BoundedText:
    """Keeps the first `head_chars` and the last `tail_chars` of a stream, counting what falls between
    (a gate's output for the model here, and for the gate's card in acp_server)."""

    def __init__(self, head_chars: int = HEAD_CHARS, tail_chars: int = TAIL_CHARS) -> None:
        self.head_chars = head_chars
        self.tail_chars = tail_chars
        self.head = ""
        self.tail = ""
        self.omitted = 0

    def add(self, text: str) -> None:
        if len(self.head) < self.head_chars:
            room = self.head_chars - len(self.head)
            self.head += text[:room]
            text = text[room:]
        if not text:
            return
        self.tail += text
        if len(self.tail) > self.tail_chars:
            cut = len(self.tail) - self.tail_chars
            self.omitted += cut
            self.tail = self.tail[cut:]

    def text(self) -> str:
        if not self.omitted:
            return self.head + self.tail
        return f"{self.head}\n[... {self.omitted} characters omitted ...]\n{self.tail}"


async def run_gate(
    gate: Gate,
    cwd: str,
    *,
    env: Mapping[str, str] | None = None,
    on_output: Callable[[str], None] | None = None,
) -> GateResult:
    """Run `gate.command` with `sh -c` in `cwd` through kernel_bridge's launch seam (`env`, default
    this process's, is scrubbed there); cancelling this coroutine kills the process group."""
    started = time.monotonic()
    async with contextlib.AsyncExitStack() as stack:
        # kernel_bridge's launch seam: scrubbed env, no inherited fds, no capabilities, its own
        # process group under the parent watch, and on a sandbox tier the kernel's confinement.
        try:
            launch = await stack.enter_async_context(workspace_launch.apolicy(cwd, env))
            proc = await stack.enter_async_context(
                workspace_launch.start(
                    ["/bin/sh", "-c", gate.command], launch, stderr=asyncio.subprocess.STDOUT
                )
            )
        except (OSError, KernelBridgeError) as exc:
            return GateResult(gate.command, None, "", time.monotonic() - started, error=str(exc))
        return await _supervise(gate, proc, started, on_output)
    raise AssertionError("unreachable")  # mypy: the exit stack does not swallow exceptions


async def _supervise(
    gate: Gate, proc: asyncio.subprocess.Process, started: float, on_output: Callable[[str], None] | None
) -> GateResult:
    """Stream the gate's output, bounded; kill its group at the timeout or on cancel."""
    reaper.track(proc.pid)
    output = BoundedText()
    decoder = _Utf8Stream()
    assert proc.stdout is not None

    async def pump() -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(_READ):
            text = decoder.feed(chunk)
            if text:
                output.add(text)
                if on_output is not None:
                    on_output(text)
        rest = decoder.flush()
        if rest:
            output.add(rest)
            if on_output is not None:
                on_output(rest)
        await proc.wait()

    timed_out = False
    try:
        await asyncio.wait_for(pump(), timeout=gate.timeout)
    except TimeoutError:
        timed_out = True
        await _kill_group(proc)
    except BaseException:
        # Cancelled (the user stopped the loop): the gate and everything it started goes now.
        await asyncio.shield(_kill_group(proc))
        raise
    finally:
        reaper.forget(proc.pid)
    duration = time.monotonic() - started
    code = None if timed_out else proc.returncode
    return GateResult(gate.command, code, output.text(), duration, timed_out=timed_out)


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    for sig, wait in ((signal.SIGTERM, KILL_GRACE), (signal.SIGKILL, 5.0)):
        kill_group(proc.pid, sig)
        try:
            await asyncio.wait_for(proc.wait(), timeout=wait)
            break
        except TimeoutError:
            continue
    # The leader may be gone while children linger in the group; SIGKILL them too.
    kill_group(proc.pid)


class _Utf8Stream:
    """Incremental UTF-8 decoding: a character split across reads is not replaced by U+FFFD."""

    def __init__(self) -> None:
        import codecs

        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes) -> str:
        return str(self._decoder.decode(data))

    def flush(self) -> str:
        return str(self._decoder.decode(b"", final=True))
