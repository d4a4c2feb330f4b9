"""The one seam through which the server starts a process that runs workspace-controlled code.

Gates, the stdio MCP servers, every `git` the server runs (`safe_git`), the ipykernel probe of a
configured interpreter and, through the same pieces, the kernels (and skill checks' scratch kernels,
started by the backend's launcher): each program is started with

* a **scrubbed environment** (`workspace_environment`): no model key or other credential
  (`environment.is_secret`), none of the server's own `CONTINUAL_ACP_*` settings (a gateway's
  address and token, the config path, a bridge address), no `JPY_PARENT_PID`;
* **no inherited descriptors** beyond its own stdin/stdout/stderr (`close_fds`: not even one the
  server opened without `O_CLOEXEC`);
* **no capabilities and `no_new_privs`**: it runs under the group-watch script, whose first act is
  `group_watch.drop_capabilities` (a kernel runs the same function before its interpreter starts,
  `group_watch.exec_argv`, and again in its launch code). A root server
  is non-dumpable (`hardening`), but CAP_SYS_PTRACE ignores that: without this, a program the
  repository names (a git fsmonitor hook, a gate) could read `/proc/<server>/environ` or write the
  editor's protocol pipe through `/proc/<server>/fd/0`;
* **its own process group and a parent watch** (`group_watch`): a timeout or cancel kills
  everything it started, and a SIGKILLed server leaves nothing running;
* on a sandbox tier, **the kernel's confinement** (`confinement.Confinement`): the kernels' backend,
  registered with `use_confinement` (the `SandboxLauncher`), gives a gate the same read-only
  `.git`, `.continual-acp/`, data dir and protected paths (`KernelBackend.command_confinement`).
  Git and MCP servers are not confined (see `safe_git`; an MCP server is the user's tool).

A `LaunchPolicy` says how (cwd, env, confinement); `launch_argv` is the argv that applies it;
`start` (async, the caller keeps its pipes, timeouts and group kill) and `run` (blocking, for
callers already off the event loop) start it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from host_base.process_groups import kill_group
from kernel_bridge import group_watch
from kernel_bridge.environment import scrub_environment
from kernel_bridge.group_watch import drop_capabilities

if TYPE_CHECKING:
    from kernel_bridge.backend import KernelBackend

__all__ = [
    "SERVER_ONLY_PREFIX",
    "LaunchPolicy",
    "RunResult",
    "apolicy",
    "confinement_source",
    "drop_capabilities",
    "launch_argv",
    "policy",
    "run",
    "start",
    "use_confinement",
    "workspace_environment",
]

# The server's own settings: nothing a workspace program needs, some of them credentials
# (`CONTINUAL_ACP_GATEWAY_URL` may carry one in its userinfo).
SERVER_ONLY_PREFIX = "CONTINUAL_ACP_"
_ALWAYS_DROPPED = frozenset({"JPY_PARENT_PID"})


def workspace_environment(
    base: Mapping[str, str] | None = None,
    *,
    extra: Mapping[str, str] | None = None,
    keep: Collection[str] = (),
) -> dict[str, str]:
    """`base` (default: this process's environment) less credentials (names in `keep` pass), the
    server's `CONTINUAL_ACP_*` settings and `JPY_PARENT_PID`, with `extra` over it (variables the
    user configured for that one program, such as an MCP server's token, pass as given)."""
    env = scrub_environment(os.environ if base is None else base, keep)
    for name in [n for n in env if n.upper().startswith(SERVER_ONLY_PREFIX) or n in _ALWAYS_DROPPED]:
        if name not in keep:
            del env[name]
    if extra:
        env.update(extra)
    return env


class Confinement(Protocol):
    """What `confinement.Confinement` offers the seam (kept structural: no import of the sandbox)."""

    @property
    def prefix(self) -> tuple[str, ...]: ...

    @property
    def pid_namespace(self) -> bool: ...


# One kernel backend per server process (the config has one), so its confinement is the process's:
# registered where the backend is built, read wherever a workspace command starts. The backend
# (`backend.KernelBackend`) is the one seam for where kernels come from and what fences the
# workspace's other code (`command_confinement`).
_source: KernelBackend | None = None


def use_confinement(source: KernelBackend | None) -> None:
    """Confine every later workspace command as `source` confines kernels (None: unconfined)."""
    global _source
    _source = source


def confinement_source() -> KernelBackend | None:
    """The registered confinement source (the sandbox launcher on a sandbox backend), or None."""
    return _source


@dataclass(frozen=True, slots=True)
class LaunchPolicy:
    """How one workspace command runs: its cwd, its whole environment, and the confinement prefix."""

    cwd: str
    env: Mapping[str, str] = field(default_factory=workspace_environment)
    confinement: Confinement | None = None


def _make_policy(
    cwd: str | os.PathLike[str],
    env: Mapping[str, str] | None,
    confine: bool,
    extra_env: Mapping[str, str] | None,
) -> tuple[LaunchPolicy, Path | None]:
    scrubbed = workspace_environment(env, extra=extra_env)
    source = _source if confine else None
    if source is None:
        return LaunchPolicy(os.fspath(cwd), scrubbed), None
    own_dir = Path(tempfile.mkdtemp(prefix="cacp-launch-"))
    try:
        confinement = source.command_confinement(Path(cwd), own_dir)
    except BaseException:
        shutil.rmtree(own_dir, ignore_errors=True)
        raise
    return LaunchPolicy(os.fspath(cwd), scrubbed, confinement), own_dir


@contextlib.contextmanager
def policy(
    cwd: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    *,
    confine: bool = True,
    extra_env: Mapping[str, str] | None = None,
) -> Iterator[LaunchPolicy]:
    """A policy for a command in `cwd`: `env` (default: this process's) scrubbed by
    `workspace_environment`, and, when `confine` and a confinement source is registered, the
    kernel's confinement with a private directory of its own (removed on exit). Raises when the
    configured sandbox tier cannot work (the command must not run unconfined)."""
    launch, own_dir = _make_policy(cwd, env, confine, extra_env)
    try:
        yield launch
    finally:
        if own_dir is not None:
            shutil.rmtree(own_dir, ignore_errors=True)


@contextlib.asynccontextmanager
async def apolicy(
    cwd: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    *,
    confine: bool = True,
    extra_env: Mapping[str, str] | None = None,
) -> AsyncIterator[LaunchPolicy]:
    """`policy` for the event loop: the private directory (which the command filled) is removed in
    a thread, and the tier's first probe runs off the loop too."""
    launch, own_dir = await asyncio.to_thread(_make_policy, cwd, env, confine, extra_env)
    try:
        yield launch
    finally:
        if own_dir is not None:
            await asyncio.shield(asyncio.to_thread(shutil.rmtree, own_dir, True))


def launch_argv(command: Sequence[str], launch: LaunchPolicy, parent_pid: int | None = None) -> list[str]:
    """The argv that runs `command` under `launch`: the group watch (capabilities dropped, its own
    group, watching `parent_pid`, default this process) and the confinement prefix.

    Landlock needs no privilege, so the watch comes first and the confinement restricts what it
    execs. bubblewrap needs the capabilities to build its namespaces, so it comes first and the watch
    runs inside, as the sandbox's first program, dropping them before the command; the server is
    not in that pid namespace, and `--die-with-parent` ends the sandbox with it."""
    if launch.confinement is None:
        return group_watch.watched_argv(list(command), parent_pid)
    prefix = list(launch.confinement.prefix)
    if launch.confinement.pid_namespace:
        # Inside, the watch's parent is the namespace's init (pid 1): the watch never fires there.
        return [*prefix, *group_watch.watched_argv(list(command), 1, embedded=True)]
    return group_watch.watched_argv([*prefix, *command], parent_pid)


@contextlib.asynccontextmanager
async def start(
    command: Sequence[str],
    launch: LaunchPolicy,
    *,
    stdin: int | IO[Any] | None = asyncio.subprocess.DEVNULL,
    stdout: int | IO[Any] | None = asyncio.subprocess.PIPE,
    stderr: int | IO[Any] | None = asyncio.subprocess.PIPE,
) -> AsyncIterator[asyncio.subprocess.Process]:
    """Start `command` under `launch`; the process leads its own session and process group (so
    `os.killpg(process.pid, ...)` ends all of it). Only its three standard streams are inherited.
    The caller waits for and kills it; leaving the block kills a group still running."""
    process = await asyncio.create_subprocess_exec(
        *launch_argv(command, launch),
        cwd=launch.cwd,
        env=dict(launch.env),
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
        close_fds=True,
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            kill_group(process.pid)


@dataclass(frozen=True, slots=True)
class RunResult:
    returncode: int | None  # None: killed at the timeout
    stdout: bytes
    stderr: bytes


def run(
    command: Sequence[str],
    launch: LaunchPolicy,
    *,
    input: bytes | None = None,
    timeout: float = 60.0,
) -> RunResult:
    """Run `command` under `launch` to the end, blocking (call it off the event loop); at `timeout`
    its whole group is killed and `returncode` is None. Raises OSError when it cannot start."""
    with subprocess.Popen(
        launch_argv(command, launch),
        cwd=launch.cwd,
        env=dict(launch.env),
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        close_fds=True,
    ) as process:
        try:
            out, err = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(process.pid)
            out, err = process.communicate()
            return RunResult(None, out, err)
        except BaseException:
            kill_group(process.pid)
            raise
        return RunResult(process.returncode, out, err)
