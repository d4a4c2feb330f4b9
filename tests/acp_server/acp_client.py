"""A small ACP test client: spawns the real `continual-acp` over real pipes and checks every frame.

* Every line the server writes must be one JSON-RPC object (stdout stays clean).
* Every `session/update`, every agent->client request and every response is validated against the
  `acp.schema` pydantic models AND round-tripped: those models are lenient (a bad optional field is
  silently dropped or defaulted), so a frame whose re-dump differs from what was sent is flagged too.
* Agent->client requests (permission, fs) are answered by policies the test sets.
* All messages are kept in arrival order, so tests can pin "updates before the response" and
  "commands after the response".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import acp.schema as schema
import server_zygote

from acp_driver import AgentRequestError, BadLine, ClientCore, ClientPolicy, Incoming, Response, ThreadClient
from acp_driver import RpcError as RpcError
from acp_driver import select as select
from acp_driver.policy import METHOD_NOT_FOUND, RESOURCE_NOT_FOUND

SERVER_ARGV = [sys.executable, "-m", "acp_server"]

RESPONSE_MODELS = {
    "initialize": "InitializeResponse",
    "session/new": "NewSessionResponse",
    "session/load": "LoadSessionResponse",
    "session/list": "ListSessionsResponse",
    "session/resume": "ResumeSessionResponse",
    "session/close": "CloseSessionResponse",
    "session/delete": "DeleteSessionResponse",
    "session/set_mode": "SetSessionModeResponse",
    "session/set_config_option": "SetSessionConfigOptionResponse",
    "session/prompt": "PromptResponse",
}
AGENT_REQUEST_MODELS = {
    "session/request_permission": "RequestPermissionRequest",
    "fs/read_text_file": "ReadTextFileRequest",
    "fs/write_text_file": "WriteTextFileRequest",
}


@dataclass
class Frame:
    """One message from the server, in arrival order."""

    seq: int
    message: dict[str, Any]


def _strip_none(value: Any) -> Any:
    if isinstance(value, dict):
        # The schema allows custom `_`-prefixed config option categories; the 0.12.1 models predate
        # that and drop them, so they are left out of the strict comparison.
        return {
            k: _strip_none(v)
            for k, v in value.items()
            if v is not None and not (k == "category" and isinstance(v, str) and v.startswith("_"))
        }
    if isinstance(value, list):
        return [_strip_none(v) for v in value]
    return value


# Unstable v1 fields acp.schema 0.12 does not model (its models drop them), by response model: checked
# by shape, then left out of the strict round trip.
UNMODELLED = {
    "InitializeResponse": (
        ("agentCapabilities", "sessionCapabilities", "status"),
        ("agentCapabilities", "sessionCapabilities", "title"),
        ("agentCapabilities", "sessionCapabilities", "systemPrompt"),
    ),
}


def without_paths(payload: Any, paths: tuple[tuple[str, ...], ...]) -> Any:
    copy = json.loads(json.dumps(payload))
    for *parents, key in paths:
        node = copy
        for name in parents:
            node = node.get(name) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(key, None)
    return copy


def _at(payload: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        payload = payload.get(name) if isinstance(payload, dict) else None
    return payload


def check_unstable(name: str, payload: Any) -> str | None:
    """None if `payload` is a valid `$defs[name]` of the unstable v1 schema the npm SDK ships."""
    return sdk_schema_problem(UNSTABLE_SCHEMA_PATH, name, payload, "unstable")


_VALIDATORS: dict[tuple[Path, str], Any] = {}


def sdk_schema_problem(path: Path, name: str, payload: Any, label: str) -> str | None:
    """None if `payload` is a valid `$defs[name]` of the SDK schema at `path`. One validator per
    schema and name: `jsonschema.validate` checks the whole schema against its meta-schema each call."""
    import jsonschema

    key = (path, name)
    if key not in _VALIDATORS:
        schema = json.loads(path.read_text(encoding="utf-8"))
        root = {"$schema": schema["$schema"], "$ref": f"#/$defs/{name}", "$defs": schema["$defs"]}
        _VALIDATORS[key] = jsonschema.validators.validator_for(root)(root)
    error = jsonschema.exceptions.best_match(_VALIDATORS[key].iter_errors(payload))
    if error is None:
        return None
    return f"{label} {name}: {error.message} at {'/'.join(map(str, error.absolute_path))}"


def check_model(model_name: str, payload: Any) -> str | None:
    """None if `payload` validates against the model and survives a strict round trip."""
    if model_name in UNMODELLED:
        # Each is a capability object (`{}` or with `_meta`), as the unstable schema defines them (the
        # golden initialize frame is validated against that schema in full).
        for path in UNMODELLED[model_name]:
            value = _at(payload, path)
            if value is not None and not isinstance(value, dict):
                return f"{model_name}: {'.'.join(path)} must be an object, not {value!r}"
        payload = without_paths(payload, UNMODELLED[model_name])
    model = getattr(schema, model_name)
    try:
        parsed = model.model_validate(payload)
    except Exception as exc:
        return f"{model_name}: {exc}"
    dumped = parsed.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_unset=True)
    if _strip_none(dumped) != _strip_none(payload):
        return f"{model_name}: lenient parse changed the frame:\n sent   {payload}\n parsed {dumped}"
    return None


# Session updates of the current stable v1 schema that acp.schema (0.12) does not model yet: checked
# with jsonschema against the v1 schema's SessionUpdate instead (acp_v1_session_update.schema.json).
V1_ONLY_UPDATES = ("notice", "compaction_update", "compaction_summary_chunk")
_V1_VALIDATOR: list[Any] = []


def check_v1_update(update: Any) -> str | None:
    """None if `update` is a valid v1 SessionUpdate (by the vendored stable schema). The schema is
    checked against its meta-schema once, here, not per frame as `jsonschema.validate` would (~0.2 s)."""
    import jsonschema

    if not _V1_VALIDATOR:
        path = Path(__file__).with_name("acp_v1_session_update.schema.json")
        schema = json.loads(path.read_text(encoding="utf-8"))
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        _V1_VALIDATOR.append(cls(schema))
    error = jsonschema.exceptions.best_match(_V1_VALIDATOR[0].iter_errors(update))
    if error is not None:
        return f"v1 SessionUpdate: {error.message}"
    return None


# Session updates of the unstable v1 schema, sent only to clients that advertise them: checked against
# the unstable schema the npm SDK ships (tests/conformance/node_modules), never a hand copy.
UNSTABLE_UPDATES = ("plan_update", "plan_removed", "subagent_update")
UNSTABLE_SCHEMA_PATH = (
    Path(__file__).resolve().parents[1]
    / "conformance/node_modules/@agentclientprotocol/sdk/schema/v1/schema.unstable.json"
)


def check_unstable_update(update: Any) -> str | None:
    """None if `update` is a valid SessionUpdate of the unstable v1 schema."""
    return check_unstable("SessionUpdate", update)


# A connection that speaks the ACP v2 draft (`CONTINUAL_ACP_PROTOCOL=2`, protocolVersion 2): every
# frame is checked with jsonschema against the v2 draft schema the npm SDK ships.
V2_SCHEMA_PATH = UNSTABLE_SCHEMA_PATH.parents[1] / "v2/schema.json"
SDK_V1_SCHEMA = UNSTABLE_SCHEMA_PATH.parent / "schema.json"
V2_RESPONSES = {
    "initialize": "InitializeResponse",
    "session/new": "NewSessionResponse",
    "session/prompt": "PromptResponse",
    "session/set_config_option": "SetSessionConfigOptionResponse",
    "session/resume": "ResumeSessionResponse",
}
V2_AGENT_REQUESTS = {"session/request_permission": "RequestPermissionRequest"}


def check_v2(name: str, payload: Any) -> str | None:
    """None if `payload` is a valid `$defs[name]` of the v2 draft schema."""
    return sdk_schema_problem(V2_SCHEMA_PATH, name, payload, "v2")


PermissionPolicy = Callable[[dict[str, Any]], dict[str, Any]]


class _TestPolicy(ClientPolicy):
    """The shared client's answers, steered by the test through the client's attributes: the
    permission policy, holding prompts open, an in-memory file system, the elicitation answer. Every
    agent request is recorded, and every answer is checked against the schema."""

    def __init__(self, client: AcpClient) -> None:
        super().__init__()
        self.client = client

    def answer(self, request: Mapping[str, Any]) -> dict[str, Any] | None:
        with self.client._cond:
            self.client.agent_requests.append(dict(request))
        result = super().answer(request)
        method, problem = request.get("method"), None
        if result is not None and method == "session/request_permission":
            problem = check_model("RequestPermissionResponse", result)
        elif result is not None and method == "elicitation/create":
            problem = sdk_schema_problem(SDK_V1_SCHEMA, "CreateElicitationResponse", result, "v1")
        if problem:
            self.client.violations.append(problem)
        return result

    def request_permission(self, params: dict[str, Any]) -> dict[str, Any] | None:
        if self.client.hold_permissions:
            return None
        return self.client.permission_policy(params)

    def read_text_file(self, params: dict[str, Any]) -> dict[str, Any] | None:
        path = params["path"]
        if path not in self.client.files:
            raise AgentRequestError(RESOURCE_NOT_FOUND, f"no {path}")
        return {"content": self.client.files[path]}

    def write_text_file(self, params: dict[str, Any]) -> dict[str, Any] | None:
        self.client.files[params["path"]] = params["content"]
        return {}

    def create_elicitation(self, params: dict[str, Any]) -> dict[str, Any] | None:
        if self.client.elicitation_policy is None:
            return self.unknown("elicitation/create", params)
        if self.client.hold_permissions:
            return None
        return self.client.elicitation_policy(params)

    def unknown(self, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        raise AgentRequestError(METHOD_NOT_FOUND, "Method not found")


class AcpClient:
    def __init__(
        self,
        env: dict[str, str],
        *,
        argv: list[str] | None = None,
        cwd: str | None = None,
        v2: bool = False,
    ) -> None:
        self.v2 = v2  # frames are checked against the ACP v2 draft schema instead of v1
        self._stderr = tempfile.TemporaryFile()
        full_env = {**os.environ, **env}
        self.proc: Any
        if server_zygote.uses_zygote(argv):  # forked with the imports done (server_zygote.py says when)
            self.proc = server_zygote.launch(argv or SERVER_ARGV, env=full_env, cwd=cwd, stderr=self._stderr)
        else:
            self.proc = subprocess.Popen(
                argv or SERVER_ARGV,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                env=full_env,
                cwd=cwd,
            )
        self.frames: list[Frame] = []
        self.garbage: list[bytes] = []
        self.violations: list[str] = []
        self.agent_requests: list[dict[str, Any]] = []
        self.permission_policy: PermissionPolicy = select("allow_once")
        self.files: dict[str, str] = {}
        self.hold_permissions = False  # when True, permission requests (and forms) stay unanswered
        # `elicitation/create` answers (a client that advertised `elicitation.form`); None: -32601.
        self.elicitation_policy: Callable[[dict[str, Any]], dict[str, Any]] | None = None
        self._seq = 0
        # Framing, ids, request matching and the answers to the agent come from the shared client;
        # this class adds the schema checks, the frame list tests wait on, and the launch.
        self.core = ClientCore(_TestPolicy(self))
        self.transport = ThreadClient(
            self.proc.stdin, self.proc.stdout, self.core, on_incoming=self._received
        )
        self._cond = self.transport.cond
        self._reader = self.transport.reader
        self.transport.start()

    # ------------------------------------------------------------ sending

    def send_raw(self, data: bytes) -> None:
        self.transport.send_raw(data)

    def send(self, message: dict[str, Any]) -> None:
        self.transport.send(message)

    def start_request(self, method: str, params: Any = None, *, request_id: Any = None) -> Any:
        return self.transport.start_request(method, params, request_id=request_id)

    def notify(self, method: str, params: Any) -> None:
        self.transport.notify(method, params)

    def request(self, method: str, params: Any = None, *, timeout: float = 60.0) -> Any:
        return self.result(self.start_request(method, params), timeout=timeout)

    # ------------------------------------------------------------ waiting

    def response_frame(self, request_id: Any, timeout: float = 60.0) -> Frame:
        def found() -> Frame | None:
            for frame in self.frames:
                m = frame.message
                if "method" not in m and m.get("id") == request_id and type(m.get("id")) is type(request_id):
                    return frame
            return None

        with self._cond:
            if not self._cond.wait_for(lambda: found() is not None or self.proc.poll() is not None, timeout):
                raise TimeoutError(f"no response to request {request_id!r} within {timeout} s")
            frame = found()
        if frame is None:
            raise EOFError(
                f"server exited ({self.proc.returncode}) before answering {request_id!r}:\n{self.stderr()}"
            )
        return frame

    def result(self, request_id: Any, timeout: float = 60.0) -> Any:
        message = self.response_frame(request_id, timeout).message
        if "error" in message:
            raise RpcError(message["error"])
        return message["result"]

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30.0) -> Frame:
        def found() -> Frame | None:
            return next((f for f in self.frames if predicate(f.message)), None)

        with self._cond:
            if not self._cond.wait_for(lambda: found() is not None, timeout):
                raise TimeoutError("no matching message within timeout")
            frame = found()
        assert frame is not None
        return frame

    def wait_for_after(
        self, seen: int, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30.0
    ) -> Frame:
        """The first matching message among those that arrived after the first `seen` frames."""

        def found() -> Frame | None:
            return next((f for f in self.frames[seen:] if predicate(f.message)), None)

        with self._cond:
            if not self._cond.wait_for(lambda: found() is not None, timeout):
                raise TimeoutError("no matching message within timeout")
            frame = found()
        assert frame is not None
        return frame

    def updates(self, session_id: str | None = None) -> list[dict[str, Any]]:
        with self._cond:
            return [
                f.message["params"]["update"]
                for f in self.frames
                if f.message.get("method") == "session/update"
                and (session_id is None or f.message["params"].get("sessionId") == session_id)
            ]

    def update_frames(self, kind: str | None = None) -> list[Frame]:
        with self._cond:
            return [
                f
                for f in self.frames
                if f.message.get("method") == "session/update"
                and (kind is None or f.message["params"]["update"].get("sessionUpdate") == kind)
            ]

    # ------------------------------------------------------------ lifecycle

    def close(self, timeout: float = 60.0) -> int:
        """Close stdin (EOF) and wait for the exit code."""
        if self.proc.stdin and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    def wait_for_stderr(self, text: str, timeout: float = 30.0) -> None:
        """Wait until the server's stderr (a file it writes directly: no frame, no event) holds `text`."""
        deadline = time.monotonic() + timeout
        while text not in self.stderr():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{text!r} not on the server's stderr within {timeout} s")
            threading.Event().wait(0.02)

    # ------------------------------------------------------------ reading

    def _received(self, item: Incoming) -> None:
        """Each line the server wrote, on the reader thread, in order (before any answer)."""
        if isinstance(item, BadLine):
            with self._cond:
                self.garbage.append(item.raw)
                self._cond.notify_all()
            return
        self._validate(item.message, item.method if isinstance(item, Response) else None)
        with self._cond:
            self._seq += 1
            self.frames.append(Frame(self._seq, item.message))
            self._cond.notify_all()

    def _validate(self, message: dict[str, Any], request_method: str | None) -> None:
        if self.v2:
            self._validate_v2(message, request_method)
            return
        problems: list[str] = []
        if message.get("jsonrpc") != "2.0":
            problems.append(f"bad envelope: {message}")
        method = message.get("method")
        params = message.get("params")
        update = params.get("update") if isinstance(params, dict) else None
        if (
            method == "session/update"
            and isinstance(update, dict)
            and update.get("sessionUpdate") in V1_ONLY_UPDATES
        ):
            problem = check_v1_update(update)
            if problem:
                problems.append(problem)
        elif (
            method == "session/update"
            and isinstance(update, dict)
            and update.get("sessionUpdate") in UNSTABLE_UPDATES
        ):
            problem = check_unstable_update(update)
            if problem:
                problems.append(problem)
        elif method == "session/update":
            problem = check_model("SessionNotification", message.get("params"))
            if problem:
                problems.append(problem)
        elif method == "$/cancel_request":
            problem = check_model("CancelRequestNotification", params)
            if problem:
                problems.append(problem)
        elif method == "elicitation/create":
            problem = sdk_schema_problem(SDK_V1_SCHEMA, "CreateElicitationRequest", params, "v1")
            if problem:
                problems.append(problem)
        elif method in AGENT_REQUEST_MODELS:
            problem = check_model(AGENT_REQUEST_MODELS[method], message.get("params"))
            if problem:
                problems.append(problem)
        elif method is not None and not method.startswith("_"):
            problems.append(f"unexpected method from server: {method}")
        elif method is None:
            if "error" in message:
                error = message["error"]
                if not (
                    isinstance(error, dict)
                    and isinstance(error.get("code"), int)
                    and isinstance(error.get("message"), str)
                ):
                    problems.append(f"malformed error object: {message}")
            else:
                model = RESPONSE_MODELS.get(request_method or "")
                if model:
                    problem = check_model(model, message.get("result"))
                    if problem:
                        problems.append(problem)
        if problems:
            with self._cond:
                self.violations.extend(problems)

    def _validate_v2(self, message: dict[str, Any], request_method: str | None) -> None:
        method, problem = message.get("method"), None
        if message.get("jsonrpc") != "2.0":
            problem = f"bad envelope: {message}"
        elif method == "session/update":
            problem = check_v2("UpdateSessionNotification", message.get("params"))
        elif method in V2_AGENT_REQUESTS:
            problem = check_v2(V2_AGENT_REQUESTS[method], message.get("params"))
        elif method is not None and not method.startswith(("_", "$/")):
            problem = f"unexpected method from server: {method}"
        elif method is None and "result" in message:
            model = V2_RESPONSES.get(request_method or "")
            problem = check_v2(model, message["result"]) if model else None
        if problem:
            with self._cond:
                self.violations.append(problem)

    def answer_permission(self, request: dict[str, Any], result: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "id": request["id"], "result": result})


# Servers told to exit (stdin closed) at a test's teardown that finish shutting down while later
# tests run: a graceful exit (final snapshot, polite kernel shutdown) takes about a second, and
# waiting for it in every teardown was a tenth of the suite. Their exit code and any late stdout
# garbage are still checked: when more than `_MAX_CLOSING` are pending, by the next teardown, and
# for all of them at the end of the session (tests/conftest.py).
_MAX_CLOSING = 3
_closing: list[tuple[str, AcpClient, int]] = []


def _stdout_problems(client: AcpClient, skip: int = 0) -> list[str]:
    found = [f"non-JSON on stdout: {line[:200]!r}" for line in client.garbage] + client.violations
    return found[skip:]


def close_and_check(client: AcpClient) -> list[str]:
    """Tell `client`'s server to exit and return the stdout/frame problems seen so far; the exit
    itself is checked later (`reap_closing`), so the next test need not wait for it."""
    problems = _stdout_problems(client)
    if client.proc.poll() is None:
        if client.proc.stdin and not client.proc.stdin.closed:
            try:
                client.proc.stdin.close()
            except BrokenPipeError:
                pass
        owner = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0]
        _closing.append((owner, client, len(problems)))
    return problems + reap_closing(keep=_MAX_CLOSING)


def reap_closing(keep: int = 0, timeout: float = 60.0) -> list[str]:
    """Wait until at most `keep` closing servers are left; the problems of those that exited
    (non-zero exit code, stdout garbage after the test's own check), each naming its test."""
    problems: list[str] = []
    pending: list[tuple[str, AcpClient, int]] = []
    for item in _closing:
        if item[1].proc.poll() is None:
            pending.append(item)
        else:
            problems += _exit_problems(*item)
    while len(pending) > keep:
        owner, client, seen = pending.pop(0)
        try:
            client.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            client.proc.kill()
            client.proc.wait()
            problems.append(f"{owner}: the server did not exit within {timeout:g} s of EOF (killed)")
            continue
        problems += _exit_problems(owner, client, seen)
    _closing[:] = pending
    return problems


def _exit_problems(owner: str, client: AcpClient, seen: int) -> list[str]:
    client._reader.join(5)  # the reader has seen every line once stdout closed
    problems = [f"{owner}: {p}" for p in _stdout_problems(client, seen)]
    code = client.proc.returncode
    if code != 0:
        problems.append(
            f"{owner}: the server exited with {code} after EOF; stderr tail:\n{client.stderr()[-1500:]}"
        )
    return problems


def server_env(home: Path, model_url: str | None = None, **extra: str) -> dict[str, str]:
    env = {
        "CONTINUAL_ACP_HOME": str(home),
        "OPENAI_API_KEY": "test-key",
        "CONTINUAL_ACP_MODEL": "scripted-model",
        "CONTINUAL_ACP_LOG_LEVEL": "INFO",
        "XDG_CONFIG_HOME": str(home / "xdg-config"),
        # Hermetic: no user skills or config from the real home directory.
        "HOME": str(home),
        # No warm pool: each session cold-starts the one kernel it uses. A warm pool would start a
        # kernel for every server (most tests never run a cell) and refill it after each session,
        # doubling the kernels the suite starts. The pooled path is pinned by the shutdown tests
        # (pool size 1, the product default), by test_acp_product_defaults.py (prompt, cancel, load,
        # /refine, autonomous mode, subagents and MCP with both defaults on) and by the kernel_bridge
        # pool tests.
        "CONTINUAL_ACP_KERNEL_POOL": "0",
        # The kernel starts at the first cell, not at session/new: most stdio tests never run one, and
        # a kernel start is ~1 s of CPU (ipykernel's imports, the server's zmq). The product default
        # (eager start) is pinned by tests that pass CONTINUAL_ACP_EAGER_KERNEL=1 and by
        # tests/agent_core/test_kernel_gate.py.
        "CONTINUAL_ACP_EAGER_KERNEL": "0",
    }
    if model_url:
        env["OPENAI_BASE_URL"] = model_url
    # benchmarks/bench_suite_stalls.py runs the suite with this set: every server reports its worst stall.
    report = os.environ.get("CONTINUAL_ACP_STALL_REPORT")
    if report:
        env["CONTINUAL_ACP_STALL_REPORT"] = report
    env.update(extra)
    return env
