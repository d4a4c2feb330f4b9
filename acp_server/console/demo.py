"""`continual-acp demo`: one scripted session through the real server, offline, as a readable transcript.

Nothing here is a mock of the server: the demo spawns `python -m acp_server` exactly as an editor
would, with a private temporary data dir, and drives it over stdio with a small built-in client. Only
the model is scripted: an OpenAI-compatible HTTP server on 127.0.0.1 (`agent_core.testing`) plays a
fixed conversation, so the real kernel runs the cells and the real harness store records the note
the agent writes, which the demo then rolls back with `/undo`.
"""

from __future__ import annotations

import asyncio
import difflib
import os
import re
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from acp_driver import AsyncClient, ClientCore, ClientError, ClientPolicy

DEMO_TIMEOUT_S = 60.0
EXIT_TIMEOUT_S = 30.0

QUESTION = "What is the sum of the squares of 1 to 10? And remember how tests are run in this project."
CELL_SUM = (
    "# Sum the squares of 1..10\ntotal = sum(i * i for i in range(1, 11))\nprint(f'sum of squares: {total}')"
)
CELL_REMEMBER = (
    "# Remember the test command for later sessions\n"
    "note = harness.create('memory', 'Test command', 'Run `make check` before committing; it runs the linters too.')\n"
    "print('noted as refinement', note['id'])"
)
ANSWER = "The sum of the squares of 1 to 10 is 385, and I asked the harness to remember the test command."


def demo_script() -> list[dict[str, Any]]:
    """The scripted model's side of the conversation (one entry per model request)."""
    from agent_core.testing.scripted_model import text, tool_call

    return [
        tool_call(CELL_SUM, title="Sum the squares of 1..10", text="Let me compute that in the kernel."),
        tool_call(CELL_REMEMBER, title="Remember the test command"),
        text(ANSWER, split=4),
    ]


class DemoFailed(Exception):
    pass


class StdioClient:
    """The shared ACP client on the server's stdio: permission "allow once", `fs/*` inside the
    demo's project, updates to the transcript; its errors become `DemoFailed`."""

    def __init__(
        self, proc: asyncio.subprocess.Process, on_update: Callable[[dict[str, Any]], None], root: Path
    ) -> None:
        core = ClientCore(ClientPolicy(root=root))
        self._client = AsyncClient(proc, core, on_update=on_update, exit_timeout=EXIT_TIMEOUT_S)

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        try:
            return await self._client.request(method, params)  # bounded by the demo's overall timeout
        except ClientError as exc:
            raise DemoFailed(str(exc)) from None

    async def close(self) -> int:
        return await self._client.close()


_FENCE = re.compile(r"^(`{3,})[\w-]*\n(.*)\n\1$", re.DOTALL)


def _unfence(text: str) -> str:
    match = _FENCE.match(text.strip())
    return match.group(2) if match else text


def _diff_lines(old: str | None, new: str) -> str:
    changed = difflib.unified_diff((old or "").splitlines(), new.splitlines(), lineterm="", n=1)
    body = [line for line in changed if not line.startswith(("---", "+++", "@@"))]
    return "\n".join(f"      {line}" for line in body)


class Transcript:
    """Turns `session/update`s into a transcript a person can read."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.cells: dict[str, dict[str, Any]] = {}
        self.statuses: dict[str, str] = {}
        self._speaking = False
        self.agent_text = ""
        self.commands_offered = asyncio.Event()

    def line(self, text: str = "") -> None:
        self._end_speech()
        self.out.write(text + "\n")
        self.out.flush()

    def _end_speech(self) -> None:
        if self._speaking:
            self.out.write("\n")
            self._speaking = False

    def update(self, params: dict[str, Any]) -> None:
        update = params["update"]
        kind = update["sessionUpdate"]
        if kind == "agent_message_chunk" and update["content"].get("type") == "text":
            text = update["content"]["text"]
            if not self._speaking:
                text = text.lstrip("\n")
                self.out.write("agent> ")
                self._speaking = True
            self.out.write(text)
            self.agent_text += text
            self.out.flush()
        elif kind == "tool_call" and update.get("kind") == "edit":
            # A harness refinement: one diff per edited entry, as an editor's review UI would show it.
            self.line(f"  [harness edit] {update['title']} ({update.get('status', 'pending')})")
            for block in update.get("content") or []:
                if block.get("type") == "diff":
                    self.line(f"    {'/'.join(Path(block['path']).parts[-4:])}")
                    self.line(_diff_lines(block.get("oldText"), block["newText"]))
        elif kind == "tool_call":
            self.cells[update["toolCallId"]] = update
            self.line(f"  [cell] {update['title']}")
            code = update.get("rawInput", {}).get("code", "")
            self.line(textwrap.indent(code, "    | "))
        elif kind == "tool_call_update" and update.get("status") in ("completed", "failed"):
            self.statuses[update["toolCallId"]] = update["status"]
            texts = [
                b["content"]["text"]
                for b in update.get("content") or []
                if b.get("type") == "content" and b["content"].get("type") == "text"
            ]
            for text in texts[1:]:  # the first block is the code, shown already
                self.line(textwrap.indent(_unfence(text), "    > "))
            self.line(f"  [cell {update['status']}]")
        elif kind == "available_commands_update":
            names = " ".join("/" + c["name"] for c in update["availableCommands"])
            self.line(f"  (commands offered: {names})")
            self.commands_offered.set()
        elif kind == "session_info_update" and update.get("title"):
            self.line(f"  (session title: {update['title']})")


async def _demo(out: TextIO, server_argv: Sequence[str]) -> None:
    from agent_core.testing.scripted_model import ScriptedModelServer, text

    started = time.perf_counter()
    transcript = Transcript(out)
    with tempfile.TemporaryDirectory(prefix="continual-acp-demo-") as scratch:
        project = Path(scratch) / "project"
        project.mkdir()
        # Background refinement may ask the model too; it gets a harmless answer once the script is done.
        with ScriptedModelServer(demo_script(), fallback=text("Nothing to refine.")) as model:
            env = dict(os.environ)
            env.update(
                CONTINUAL_ACP_HOME=str(Path(scratch) / "home"),
                XDG_CONFIG_HOME=str(Path(scratch) / "config"),
                OPENAI_BASE_URL=model.base_url,
                OPENAI_API_KEY="demo",
                CONTINUAL_ACP_MODEL="scripted-model",
                CONTINUAL_ACP_MODE="auto",
            )
            # The model is on loopback: a proxy configured for the real internet must not intercept it.
            for key in ("NO_PROXY", "no_proxy"):
                env[key] = ",".join(filter(None, ["127.0.0.1,localhost", env.get(key)]))
            log_path = Path(scratch) / "server.log"
            with log_path.open("wb") as log:
                proc = await asyncio.create_subprocess_exec(
                    *server_argv,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=log,
                    env=env,
                    cwd=project,
                )
            client = StdioClient(proc, transcript.update, project)
            try:
                await _conversation(client, transcript, str(project))
            except BaseException as exc:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
                if isinstance(exc, DemoFailed):
                    raise DemoFailed(f"{exc}{_log_tail(log_path)}") from None
                raise
            code = await client.close()
            if code != 0:
                raise DemoFailed(f"the server exited with status {code} after its input closed")
    transcript.line(
        f"Done in {time.perf_counter() - started:.1f} s; the server exited cleanly on end of input."
    )


def _log_tail(path: Path, lines: int = 15) -> str:
    """The end of the server's stderr, to say why it failed."""
    try:
        tail = path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return "\nserver log (last lines):\n" + "\n".join(f"  {t}" for t in tail) if tail else ""


async def _conversation(client: StdioClient, transcript: Transcript, cwd: str) -> None:
    line = transcript.line
    line("continual-acp demo: the real server, kernel and harness store, with a scripted model (offline)")
    line()
    init = await client.request(
        "initialize",
        {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False},
            "clientInfo": {"name": "continual-acp-demo", "version": "1"},
        },
    )
    info = init.get("agentInfo", {})
    line(f"-> initialize: {info.get('name')} {info.get('version', '')}, protocol {init['protocolVersion']}")
    created = await client.request("session/new", {"cwd": cwd, "mcpServers": []})
    session_id = created["sessionId"]
    line(f"-> session/new: session {session_id}")
    await transcript.commands_offered.wait()  # advertised right after the response, as editors expect
    line()

    async def prompt(text: str) -> str:
        line(f"you> {text}")
        result = await client.request(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        )
        line(f"   (turn ended: {result['stopReason']})")
        line()
        return str(result["stopReason"])

    if await prompt(QUESTION) != "end_turn":
        raise DemoFailed("the first turn did not end normally")
    statuses = list(transcript.statuses.values())
    if "385" not in transcript.agent_text or statuses != ["completed", "completed"]:
        raise DemoFailed(f"the cells did not run as scripted (cell statuses: {statuses})")
    commands = ["/history", "/undo", "/history"]
    for command in commands:
        transcript.agent_text = ""
        await prompt(command)
        if not transcript.agent_text.strip():
            raise DemoFailed(f"{command} sent no reply")


def run_demo(out: TextIO | None = None, *, server_argv: Sequence[str] | None = None) -> int:
    """Run the demo; `server_argv` replaces the server command (tests use it to break the server)."""
    out = out or sys.stdout
    argv = list(server_argv or (sys.executable, "-m", "acp_server"))
    try:
        asyncio.run(asyncio.wait_for(_demo(out, argv), DEMO_TIMEOUT_S))
    except (DemoFailed, TimeoutError) as exc:
        out.write(f"\ndemo failed: {exc or 'timed out'}\n")
        return 1
    return 0
