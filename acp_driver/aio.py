"""The asyncio transport: a `ClientCore` driving a child agent over its stdin/stdout (the demo and
the eval use it).

One reader task reads the child's stdout in chunks, answers the agent's requests inline (the policy
is synchronous and quick), resolves the futures of our requests and reports updates. A line that is
not one JSON-RPC object breaks the stream: the reader stops and every waiting request fails with
`ClientError` (a protocol stream with garbage in it cannot be trusted to match answers). When the
child's output ends, waiting requests fail the same way, never hang.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from acp_driver.core import AgentRequest, ClientCore, Notification, Response, id_key
from acp_driver.framing import BadLine

EXIT_TIMEOUT_S = 60.0
READ_CHUNK = 1 << 16


class ClientError(Exception):
    """The agent answered an error, closed its output, or broke the protocol."""

    def __init__(self, message: str, error: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.error = error  # the JSON-RPC error object, when the agent answered one


class AsyncClient:
    def __init__(
        self,
        proc: asyncio.subprocess.Process,
        core: ClientCore | None = None,
        *,
        on_update: Callable[[dict[str, Any]], None] | None = None,
        exit_timeout: float = EXIT_TIMEOUT_S,
    ) -> None:
        self.proc = proc
        self.core = core or ClientCore()
        self.on_update = on_update  # each session/update's params, as it arrives
        self.exit_timeout = exit_timeout
        self._closed = False
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def spawn(
        cls,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | str | None = None,
        stderr: IO[Any] | int | None = None,
        core: ClientCore | None = None,
        on_update: Callable[[dict[str, Any]], None] | None = None,
        exit_timeout: float = EXIT_TIMEOUT_S,
    ) -> AsyncClient:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            env=dict(env) if env is not None else None,
            cwd=cwd,
        )
        return cls(proc, core, on_update=on_update, exit_timeout=exit_timeout)

    @property
    def updates(self) -> list[dict[str, Any]]:
        return self.core.updates

    # ------------------------------------------------------------ reading

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        failure = ClientError("the server closed its stdout")
        try:
            # Line by line, not `core.feed`: each line is logged and acted on before the next is
            # received, so the frame log shows an answer right after the request it answers.
            while chunk := await self.proc.stdout.read(READ_CHUNK):
                for line in self.core.decoder.feed(chunk):
                    await self._dispatch(self.core.receive(line))
            for line in self.core.decoder.end():
                await self._dispatch(self.core.receive(line))
        except ClientError as exc:
            failure = exc
        except Exception as exc:  # a closed pipe or a failing callback: fail the waiters, not hang
            failure = ClientError(f"reading the server failed: {type(exc).__name__}: {exc}")
        self._closed = True
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(failure)
        self._waiting.clear()

    async def _dispatch(self, incoming: Response | AgentRequest | Notification | BadLine) -> None:
        if isinstance(incoming, BadLine):
            raise ClientError(f"reading the server failed: {incoming.reason}: {incoming.raw[:200]!r}")
        if isinstance(incoming, Response):
            future = self._waiting.pop(id_key(incoming.request_id), None)
            if future is not None and not future.done():
                future.set_result(incoming.message)
                # Let the requester act on the response before the messages that follow it.
                await asyncio.sleep(0)
            return
        if isinstance(incoming, AgentRequest):
            line = self.core.answer(incoming)
            if line is not None:
                await self._write(line)
            return
        if incoming.message.get("method") == "session/update" and self.on_update is not None:
            params = incoming.message.get("params")
            if isinstance(params, dict):
                self.on_update(params)

    # ------------------------------------------------------------ writing

    async def _write(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line)
            await self.proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            raise ClientError("the server closed its stdin") from None

    async def request(
        self, method: str, params: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """The result of one request; `ClientError` on an error answer, a timeout or a closed stream."""
        if self._closed:
            raise ClientError(f"{method} failed: the server closed its stdout")
        request_id, line = self.core.request(method, dict(params) if params is not None else None)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[id_key(request_id)] = future
        await self._write(line)
        try:
            answer = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            self._waiting.pop(id_key(request_id), None)
            raise ClientError(f"{method} got no answer within {timeout:g} s") from None
        except ClientError as exc:
            raise ClientError(f"{method} failed: {exc}") from None
        if "error" in answer:
            error = answer["error"]
            raise ClientError(
                f"{method} failed: {json.dumps(error)[:2000]}", error if isinstance(error, dict) else None
            )
        result = answer.get("result")
        return result if isinstance(result, dict) else {}

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        if not self._closed:
            await self._write(self.core.notification(method, dict(params) if params is not None else None))

    # ------------------------------------------------------------ lifecycle

    async def close(self) -> int:
        """End of input (how an editor quits), then wait for the exit; a hung child is killed."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            code = await asyncio.wait_for(self.proc.wait(), self.exit_timeout)
        except TimeoutError:
            self.kill()
            code = await self.proc.wait()
        await self._reader
        return code

    def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
