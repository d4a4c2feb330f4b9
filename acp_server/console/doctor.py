"""`continual-acp doctor`: check what the server needs before an editor launches it.

Each check prints one line, `OK` or `FAIL`, and a failed check prints how to fix it. The checks run the
same code paths the server uses (agent_core's config loader, its model client on the `openai` library,
a real kernel started through a real session), so a green doctor means the editor will get a working
agent. The kernel check runs in a throwaway data dir, so it never adds a session to your history.
Exit status: 0 when every check passed, 1 otherwise.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import stat
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from acp_server.console.data_dir_modes import tighten  # clients
from acp_server.console.editor_launch import write_launch_lines  # clients
from agent_core import AgentConfig, load_config

# Generous: a cold kernel start on a busy 2-core machine takes a few seconds.
KERNEL_TIMEOUT_S = 60.0
MODEL_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str
    fix: str | None = None


Check = Callable[[AgentConfig], Awaitable[CheckResult]]


# ---------------------------------------------------------------- data dir


def _first_existing_ancestor(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


async def check_data_dir(config: AgentConfig) -> CheckResult:
    home = config.home
    name = "data dir"
    if not home.exists():
        parent = _first_existing_ancestor(home)
        # Really try: os.access says yes to root for /proc, and a parent that is a file passes it too.
        problem = _try_create(home)
        if problem is None:
            return CheckResult(
                name, True, f"{home} does not exist yet; it will be created (0700) on first use"
            )
        return CheckResult(
            name,
            False,
            f"{home} does not exist and cannot be created under {parent} ({problem})",
            "set CONTINUAL_ACP_HOME (or `home` in config.toml) to a writable directory, or create this "
            f"one yourself (`mkdir -p -m 700 {home}`)",
        )
    if not home.is_dir():
        return CheckResult(
            name, False, f"{home} is not a directory", "remove it, or set CONTINUAL_ACP_HOME to a directory"
        )
    probe = home / f".doctor-{os.getpid()}"
    try:
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as exc:
        return CheckResult(
            name,
            False,
            f"{home} is not writable ({exc.strerror or exc})",
            f"`chmod u+rwx {home}` (and check its owner), or set CONTINUAL_ACP_HOME to a writable directory",
        )
    # Transcripts, kernel snapshots and the harness can hold secrets: nobody else may read them.
    loose = [p for p in (home, home / "harness", home / "sessions") if p.exists() and _others_can_read(p)]
    if loose:
        shown = ", ".join(f"{p} ({stat.filemode(p.stat().st_mode)})" for p in loose)
        changed, failed = tighten(loose)  # clients: a dir made with plain `mkdir` (0755) is tightened
        if not failed:
            return CheckResult(
                name, True, f"{home} was readable by other users; tightened: {'; '.join(changed)}"
            )
        return CheckResult(
            name,
            False,
            f"readable by other users: {shown}; could not tighten {', '.join(failed)}",
            f"`chmod -R go-rwx {home}` (data dirs are meant to be 0700, files 0600)",
        )
    mode = stat.S_IMODE(home.stat().st_mode)
    return CheckResult(name, True, f"{home} is writable, mode {mode:04o}")


def _try_create(home: Path) -> str | None:
    """Create `home` (and missing parents) and write a file in it, then remove what was made.

    None when that worked, else why it did not.
    """
    made: list[Path] = []
    path = home
    while not path.exists() and path != path.parent:
        made.append(path)
        path = path.parent
    try:
        for directory in reversed(made):
            directory.mkdir(mode=0o700)
        probe = home / f".doctor-{os.getpid()}"
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as exc:
        return exc.strerror or str(exc)
    finally:
        for directory in made:
            try:
                directory.rmdir()
            except OSError:
                pass
    return None


def _others_can_read(path: Path) -> bool:
    return bool(path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO))


# ---------------------------------------------------------------- model endpoint


async def check_model(config: AgentConfig) -> CheckResult:
    from agent_core import ModelError
    from agent_core.model import DEFAULT_BASE_URL, ModelClient

    name = "model endpoint"
    endpoint = config.base_url or DEFAULT_BASE_URL
    if not config.model:
        return CheckResult(
            name,
            False,
            f"no model configured (endpoint {endpoint})",
            "run `continual-acp setup` (asks for the endpoint, key and model and checks them), or set "
            'CONTINUAL_ACP_MODEL to a model id (e.g. `gpt-4.1`), or `model = "..."` in '
            "~/.config/continual-acp/config.toml",
        )
    # One try with short timeouts: the doctor should answer in seconds, not back off for a minute.
    probe = dataclasses.replace(config, max_retries=0, connect_timeout=5.0, request_timeout=MODEL_TIMEOUT_S)
    client = ModelClient(probe)
    started = time.perf_counter()
    try:
        # A real (tiny) completion through the agent's own client: it proves the endpoint is reachable,
        # the key is accepted and the model id exists, which listing models alone would not.
        await asyncio.wait_for(
            client.complete([{"role": "user", "content": "Reply with the single word: ok"}]),
            MODEL_TIMEOUT_S + 5,
        )
    except ModelError as exc:
        return CheckResult(name, False, exc.message, _model_fix(config, endpoint, exc.status))
    except TimeoutError:
        return CheckResult(
            name,
            False,
            f"{endpoint} did not answer within {MODEL_TIMEOUT_S:.0f} s",
            "check that the model server at OPENAI_BASE_URL is up and not overloaded",
        )
    finally:
        await client.aclose()
    elapsed = time.perf_counter() - started
    return CheckResult(name, True, f"{endpoint} answered model {config.model!r} in {elapsed:.2f} s")


# Examples of a local endpoint, by the port a URL names: a llama.cpp user is not told Ollama's URL.
_LOCAL_EXAMPLES = {
    "11434": "http://localhost:11434/v1 for Ollama",
    "8080": "http://localhost:8080/v1 for llama.cpp's server",
    "8000": "http://localhost:8000/v1 for vLLM",
    "1234": "http://localhost:1234/v1 for LM Studio",
}


def _example_url(endpoint: str) -> str:
    from urllib.parse import urlsplit

    try:
        port = str(urlsplit(endpoint).port or "")
    except ValueError:
        port = ""
    if port in _LOCAL_EXAMPLES:
        return _LOCAL_EXAMPLES[port]
    return f"{_LOCAL_EXAMPLES['8080']}, or {_LOCAL_EXAMPLES['11434']}"


def _model_fix(config: AgentConfig, endpoint: str, status: int | None) -> str:
    """What to change, naming where the setting was made (environment, config file line, setup)."""
    if status in (401, 403):
        return f"set a key this endpoint accepts; the key comes from {config.origin('api_key')}"
    if status == 404:
        return f"use a model id the endpoint lists ({endpoint}/models); the model comes from {config.origin('model')}"
    where = config.origin("base_url") if config.base_url else "the default (no `base_url` set)"
    return (
        f"start the model server or correct the URL (now {endpoint}, from {where}); it must be an "
        f"OpenAI-compatible URL ending in /v1, e.g. {_example_url(endpoint)}"
    )


# ---------------------------------------------------------------- kernel


async def check_kernel(config: AgentConfig) -> CheckResult:
    from agent_core import Agent

    name = "kernel"
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="continual-acp-doctor-") as scratch:
        # A throwaway home: the check must not add a session to the user's history.
        probe = dataclasses.replace(config, home=Path(scratch) / "home", kernel_pool_size=0)
        agent: Any = Agent(probe)
        try:
            await asyncio.wait_for(_start_kernel(agent, scratch), KERNEL_TIMEOUT_S)
        except TimeoutError:
            return CheckResult(
                name,
                False,
                f"no kernel answered within {KERNEL_TIMEOUT_S:.0f} s",
                "the machine may be overloaded; `python -m ipykernel_launcher --help` should run quickly",
            )
        except Exception as exc:
            return CheckResult(
                name,
                False,
                f"kernel did not start: {type(exc).__name__}: {exc}",
                f"install ipykernel into the interpreter the server runs with (`{sys.executable} -m pip "
                "install ipykernel`), and check that nothing in ~/.ipython/profile_default/startup fails",
            )
        finally:
            await agent.aclose()
    elapsed = time.perf_counter() - started
    return CheckResult(name, True, f"an IPython kernel started and ran a cell in {elapsed:.1f} s")


async def _start_kernel(agent: Any, cwd: str) -> None:
    from agent_core import NoEditor

    await agent.start()
    session = await agent.new_session(cwd, NoEditor())
    kernel = await session.kernel()  # waits for the start, as the first cell of a session would
    result = await kernel.execute("print(6 * 7)", timeout=KERNEL_TIMEOUT_S).result()
    if result.status != "ok" or "42" not in result.output:
        raise RuntimeError(f"a test cell ended {result.status}: {result.output.strip()[:200]}")


async def check_kernel_backend(config: AgentConfig) -> CheckResult:
    """The configured kernel backend answers (gateway token, sandbox tier, provisioner spec)."""
    from agent_core.kernel.backend import probe_backend

    ok, detail, fix = await probe_backend(config.kernel_backend, home=config.home)
    return CheckResult(f"kernel backend ({config.kernel_backend.kind})", ok, detail, fix)


# ---------------------------------------------------------------- runner

CHECKS: tuple[Check, ...] = (check_data_dir, check_model, check_kernel_backend, check_kernel)


async def run_checks(config: AgentConfig, checks: tuple[Check, ...] = CHECKS) -> list[CheckResult]:
    """Each check's result, then the event loop's: the worst stall while the checks ran (the kernel
    check opens a real session in the current directory, so a repository that blocks the loop shows)."""
    from acp_server.process.watchdog import Watchdog
    from agent_core.config.table import from_env

    stall = float(from_env("CONTINUAL_ACP_STALL_SECONDS", os.environ))  # load_config checked it
    watchdog = Watchdog(stall_seconds=stall, grace_seconds=stall)  # no input to watch, nothing to kill
    watchdog.start()
    asyncio.get_running_loop().call_soon(watchdog.heartbeat)
    try:
        results = await _run_each(config, checks)
    finally:
        watchdog.stop()
    worst = watchdog.worst_stall()
    ok = worst < watchdog.stall_seconds
    results.append(
        CheckResult(
            "event loop",
            ok,
            f"worst stall {worst:.2f} s during the checks",
            None
            if ok
            else "the stack of the stalled loop is above on stderr; a file the repository "
            "holds (a FIFO, a device) or a blocking call is the usual cause",
        )
    )
    return results


async def _run_each(config: AgentConfig, checks: tuple[Check, ...]) -> list[CheckResult]:
    results = []
    for check in checks:
        try:
            results.append(await check(config))
        except Exception as exc:  # a check that crashes is a failed check, never a doctor traceback
            results.append(
                CheckResult(check.__name__.removeprefix("check_"), False, f"{type(exc).__name__}: {exc}")
            )
    return results


def _print(result: CheckResult, out: TextIO) -> None:
    out.write(f"  {'OK  ' if result.ok else 'FAIL'}  {result.name}: {result.detail}\n")
    if not result.ok and result.fix:
        out.write(f"        fix: {result.fix}\n")
    out.flush()


def _config_problem(exc: ValueError) -> CheckResult:
    """The FAIL line for a configuration `load_config` refused (the server refuses it the same way:
    every session request answers this error until it is fixed)."""
    from agent_core.config.loader import ConfigFileError

    if isinstance(exc, ConfigFileError):
        fix = (
            f'correct the line named above in {exc.path} (strings need quotes: `model = "gpt-4.1"`), '
            "or move the file away; until then sessions do not start"
            if exc.line is not None
            else f"make {exc.path} readable (`chmod u+r {exc.path}`) or move it away"
        )
        return CheckResult("config", False, str(exc), fix)
    return CheckResult(
        "config", False, str(exc), "correct the environment variable or config.toml named above"
    )


def run_doctor(out: TextIO | None = None) -> int:
    out = out or sys.stdout
    out.write("continual-acp doctor\n")
    try:
        config = load_config()
    except ValueError as exc:
        _print(_config_problem(exc), out)
        return 1
    where = config.config_file if config.config_file and config.config_file.exists() else "environment only"
    _print(
        CheckResult(
            "config", True, f"model {config.model or '(none)'}, data dir {config.home}, settings from {where}"
        ),
        out,
    )
    for warning in config.warnings:  # unknown keys: the key and the closest valid one
        out.write(f"  WARN  config: {warning}\n")
    results = asyncio.run(run_checks(config))
    for result in results:
        _print(result, out)
    failed = sum(not r.ok for r in results)
    write_launch_lines(out)  # clients: how each editor launches this installation
    out.write("all checks passed\n" if not failed else f"{failed} check{'s' * (failed > 1)} failed\n")
    return 1 if failed else 0
