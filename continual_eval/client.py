"""A small ACP client over a child server's stdio, as an editor drives it; every frame is recorded.

The eval never imports the server: it starts `python -m acp_server` (or the command it is given) and
speaks newline-delimited JSON-RPC on the child's stdin/stdout. Each line in either direction is
appended to the session's frame log (`frames.jsonl`: `{"t", "dir": "in"|"out", "msg"}`), which is the
transcript the results are recomputed from. Permission requests are answered "allow once" (the eval
runs in `auto` mode with refinement review off, so they are rare); `fs/*` requests read and write
the real files.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

EXIT_TIMEOUT_S = 60.0
LINE_LIMIT = 64 * 1024 * 1024


class ClientError(Exception):
    """The server answered an error, closed its output, or broke the protocol."""


class AcpStdioClient:
    def __init__(self, proc: asyncio.subprocess.Process, frames: TextIO) -> None:
        self._proc = proc
        self._frames = frames
        self._next_id = 0
        self._closed = False
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.updates: list[dict[str, Any]] = []  # every session/update's params, in arrival order
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def spawn(
        cls, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, frames: TextIO, stderr: TextIO
    ) -> AcpStdioClient:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            env=dict(env),
            cwd=cwd,
            limit=LINE_LIMIT,
        )
        return cls(proc, frames)

    def _log(self, direction: str, message: Mapping[str, Any]) -> None:
        self._frames.write(json.dumps({"t": time.time(), "dir": direction, "msg": message}) + "\n")

    async def _read(self) -> None:
        assert self._proc.stdout is not None
        failure: Exception = ClientError("the server closed its stdout")
        try:
            while line := await self._proc.stdout.readline():
                message = json.loads(line)
                self._log("in", message)
                if "method" in message:
                    await self._incoming(message)
                elif message.get("id") in self._waiting:
                    self._waiting.pop(message["id"]).set_result(message)
        except Exception as exc:  # a line that is not JSON: the protocol stream is broken
            failure = ClientError(f"reading the server failed: {type(exc).__name__}: {exc}")
        self._closed = True
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(failure)

    async def _incoming(self, message: dict[str, Any]) -> None:
        method, params = message["method"], message.get("params") or {}
        if method == "session/update":
            self.updates.append(params)
            return
        if "id" not in message:
            return
        result: dict[str, Any]
        if method == "session/request_permission":
            options = params.get("options") or []
            allow = next(
                (o for o in options if o.get("kind") == "allow_once"), options[0] if options else None
            )
            result = (
                {"outcome": {"outcome": "selected", "optionId": allow["optionId"]}}
                if allow
                else {"outcome": {"outcome": "cancelled"}}
            )
        elif method == "fs/read_text_file":
            result = {"content": Path(params["path"]).read_text(encoding="utf-8")}
        elif method == "fs/write_text_file":
            Path(params["path"]).write_text(params["content"], encoding="utf-8")
            result = {}
        else:
            await self._send(
                {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": method}}
            )
            return
        await self._send({"jsonrpc": "2.0", "id": message["id"], "result": result})

    async def _send(self, message: dict[str, Any]) -> None:
        assert self._proc.stdin is not None
        self._log("out", message)
        try:
            self._proc.stdin.write((json.dumps(message) + "\n").encode())
            await self._proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            raise ClientError("the server closed its stdin") from None

    async def request(
        self, method: str, params: Mapping[str, Any], *, timeout: float = 120.0
    ) -> dict[str, Any]:
        if self._closed:
            raise ClientError(f"{method} failed: the server closed its stdout")
        self._next_id += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[self._next_id] = future
        await self._send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": dict(params)})
        try:
            answer = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise ClientError(f"{method} got no answer within {timeout:g} s") from None
        except ClientError as exc:
            raise ClientError(f"{method} failed: {exc}") from None
        if "error" in answer:
            raise ClientError(f"{method} failed: {json.dumps(answer['error'])[:2000]}")
        result: dict[str, Any] = answer.get("result") or {}
        return result

    async def notify(self, method: str, params: Mapping[str, Any]) -> None:
        if not self._closed:
            await self._send({"jsonrpc": "2.0", "method": method, "params": dict(params)})

    async def close(self) -> int:
        """End of input (how an editor quits), then wait for the exit; a hung server is killed."""
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        try:
            code = await asyncio.wait_for(self._proc.wait(), EXIT_TIMEOUT_S)
        except TimeoutError:
            self.kill()
            code = await self._proc.wait()
        await self._reader
        return code

    def kill(self) -> None:
        if self._proc.returncode is None:
            self._proc.kill()
