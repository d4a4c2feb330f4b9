"""`EditorPort` over JSON-RPC: permission requests and client file system calls for one session.

fs calls are made only when the client advertised them (ACP forbids the others); agent_core checks
`can_read_files`/`can_write_files` and falls back to the disk itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence

import anyio

from acp_server.protocol import frames
from acp_server.protocol.capabilities import ClientCapabilities
from acp_server.protocol.errors import RESOURCE_NOT_FOUND, PeerError
from acp_server.protocol.transport import Connection, ConnectionClosed
from acp_server.turn.presenter import TurnPresenter
from agent_core.ports import PermissionDecision, PermissionRequest

log = logging.getLogger(__name__)

FS_TIMEOUT_SECONDS = 60.0

PERMISSION_OPTIONS = frames.permission_options(frames.PERMISSION_OPTIONS)
GATE_OPTIONS = frames.permission_options(frames.GATE_OPTIONS)
_DECISIONS: dict[str, PermissionDecision] = {
    "allow_once": "allow_once",
    "allow_always": "allow_always",
    "reject": "reject",
}


class JsonRpcEditor:
    """The client editor as agent_core sees it; bound to a session id once the session exists."""

    def __init__(
        self, connection: Connection, capabilities: ClientCapabilities, presenter: TurnPresenter | None = None
    ) -> None:
        self._connection = connection
        self._capabilities = capabilities
        self.presenter = presenter
        self.session_id: str | None = None
        self._pending: set[anyio.CancelScope] = set()
        self._cancelled_scopes: set[anyio.CancelScope] = set()
        self._settling: set[asyncio.Task[None]] = set()  # cards of abandoned subagent requests

    @property
    def can_read_files(self) -> bool:
        return self._capabilities.read_text_file

    @property
    def can_write_files(self) -> bool:
        return self._capabilities.write_text_file

    def _sid(self) -> str:
        if self.session_id is None:
            raise RuntimeError("editor used before its session was created")
        return self.session_id

    async def request_permission(self, request: PermissionRequest) -> PermissionDecision:
        if self.presenter is None:
            raise RuntimeError("editor used before its session was created")
        if request.subagent is not None:
            answer, failure = await self._ask_for_subagent(request)
        elif request.purpose == "gates":
            commands = request.code.splitlines()
            tool_call = await self.presenter.announce_gates(request.cell_id, request.title, commands)
            answer, failure = await self._ask(tool_call, GATE_OPTIONS)
            await self.presenter.settle_gates(request.cell_id, answer == "allow_once")
        else:
            tool_call = await self.presenter.announce_cell(request.cell_id, request.code, request.title)
            answer, failure = await self._ask(tool_call, PERMISSION_OPTIONS)
        if failure is not None:
            from agent_core import PermissionRequestFailed

            raise PermissionRequestFailed(failure)
        if answer is None:
            # No answer means no consent: the cell does not run.
            return "reject"
        if answer == "cancelled":
            return "cancelled"
        return _DECISIONS.get(answer, "reject")

    async def ask(
        self, tool_call: Mapping[str, object], options: Sequence[Mapping[str, object]]
    ) -> str | None:
        """`session/request_permission` with any options: the chosen optionId, "cancelled", or None.

        None = no usable answer (the client failed the request or answered malformed). A
        `session/cancel` resolves every waiting ask as "cancelled".
        """
        answer, _failure = await self._ask(tool_call, options)
        return answer

    async def _ask_for_subagent(self, request: PermissionRequest) -> tuple[str | None, str | None]:
        """A child's request, in this (its parent's) session, naming the child in `_meta`. It is sent at
        once whether or not the parent is in a turn; its card stays open across the parent's turns
        (the child runs on its own) until the child's cell ends. When the child stops waiting
        (cancelled, its parent closed) the client gets `$/cancel_request` and the card is closed."""
        assert self.presenter is not None
        presenter = self.presenter
        tool_call = await presenter.announce_cell(request.cell_id, request.code, request.title, detached=True)
        meta = frames.subagent_meta(
            request.subagent_session or "", request.subagent or "", "needs-action", self._sid()
        )
        try:
            return await self._ask(tool_call, PERMISSION_OPTIONS, meta=meta, cancel_if_abandoned=True)
        except BaseException:
            # Abandoned (the child was cancelled while asking): no event will close its card. Closed
            # from a task of its own: this one is being cancelled.
            settle = presenter.settle_detached(request.cell_id, "cancelled", "the subagent stopped waiting")
            task = asyncio.get_running_loop().create_task(settle)
            self._settling.add(task)
            task.add_done_callback(self._settling.discard)
            raise

    async def _ask(
        self,
        tool_call: Mapping[str, object],
        options: Sequence[Mapping[str, object]],
        *,
        meta: Mapping[str, object] | None = None,
        cancel_if_abandoned: bool = False,
    ) -> tuple[str | None, str | None]:
        """`ask`, plus the client's error message when it failed the request instead of answering."""
        params = frames.permission_request(self._sid(), tool_call, options, meta)
        try:
            cancelled, result = await self._cancellable_request(
                "session/request_permission", params, cancel_if_abandoned
            )
        except (PeerError, ConnectionClosed) as exc:
            log.warning("permission request failed (%s)", exc)
            error = getattr(exc, "error", None)
            message = error.get("message") if isinstance(error, dict) else None
            return None, str(message or exc or type(exc).__name__)
        if cancelled:
            return "cancelled", None
        outcome = result.get("outcome") if isinstance(result, dict) else None
        if not isinstance(outcome, dict):
            log.warning("malformed permission answer %r", result)
            return None, None
        if outcome.get("outcome") == "cancelled":
            return "cancelled", None
        option = outcome.get("optionId")
        return (str(option) if option is not None else None), None

    @property
    def can_elicit_forms(self) -> bool:
        return self._capabilities.elicitation_form

    async def elicit_form(
        self, message: str, schema: Mapping[str, object], *, tool_call_id: str | None = None
    ) -> tuple[str, dict[str, object]] | None:
        """`elicitation/create` with a form: (action, content) -- action "accept" (with the form's
        content), "decline" or "cancel" -- or None when the client failed the request or answered
        malformed. A `session/cancel` resolves a waiting form as "cancel"."""
        params = frames.elicitation_form_request(self._sid(), message, schema, tool_call_id=tool_call_id)
        try:
            cancelled, result = await self._cancellable_request("elicitation/create", params, True)
        except (PeerError, ConnectionClosed) as exc:
            log.warning("elicitation request failed (%s)", exc)
            return None
        if cancelled:
            return "cancel", {}
        action = result.get("action") if isinstance(result, dict) else None
        if not isinstance(action, str):
            log.warning("malformed elicitation answer %r", result)
            return None
        content = result.get("content") if isinstance(result, dict) else None
        return action, dict(content) if isinstance(content, dict) else {}

    async def _cancellable_request(
        self, method: str, params: Mapping[str, object], cancel_if_abandoned: bool
    ) -> tuple[bool, object]:
        """A request to the client that `session/cancel` resolves (`cancel_pending_permissions`):
        (True, None) when it did, else (False, the client's answer). The client's errors propagate."""
        scope = anyio.CancelScope()
        self._pending.add(scope)
        result: object = None
        try:
            with scope:
                result = await self._connection.request(
                    method, params, cancel_if_abandoned=cancel_if_abandoned
                )
        finally:
            self._pending.discard(scope)
        if scope in self._cancelled_scopes:
            self._cancelled_scopes.discard(scope)
            return True, None
        return False, result

    def cancel_pending_permissions(self) -> int:
        """Resolve every waiting permission request as "cancelled" (session/cancel); returns how many."""
        scopes = list(self._pending)
        for scope in scopes:
            self._cancelled_scopes.add(scope)
            scope.cancel()
        return len(scopes)

    async def read_text_file(self, path: str) -> str:
        if not self.can_read_files:
            raise NotImplementedError("the client did not advertise fs/read_text_file")
        try:
            result = await self._connection.request(
                "fs/read_text_file",
                frames.read_text_file_request(self._sid(), path),
                timeout=FS_TIMEOUT_SECONDS,
            )
        except PeerError as exc:
            if exc.code == RESOURCE_NOT_FOUND:
                raise FileNotFoundError(f"the editor has no file {path}") from None
            raise OSError(f"the editor could not read {path}: {exc}") from None
        content = result.get("content") if isinstance(result, dict) else None
        if not isinstance(content, str):
            raise OSError(f"client answered fs/read_text_file for {path} without text content")
        return content

    async def write_text_file(self, path: str, content: str) -> None:
        if not self.can_write_files:
            raise NotImplementedError("the client did not advertise fs/write_text_file")
        await self._connection.request(
            "fs/write_text_file",
            frames.write_text_file_request(self._sid(), path, content),
            timeout=FS_TIMEOUT_SECONDS,
        )
