"""Runs tasks x arms x sessions through the real server over stdio and writes the traces.

Per task and arm: a private data dir (`CONTINUAL_ACP_HOME`), config dir and HOME, and the task's
repository built fresh from the task (per session by default, or once per arm with `reset = "arm"`).
Each session is one server process (`python -m acp_server`, as an editor launches it): initialize,
session/new in the repository, the task's prompt, then — in arms that refine — `/refine --global`
with the task's instructions, then end of input. The checker runs after the server has exited.

Arms:
* `learning`: the harness carries over from session to session; refinement runs (`/refine` after
  each session, and the product's automatic triggers as configured); review is off so edits apply.
* `frozen`: the baseline: the harness is emptied before every session, nothing triggers refinement.
* `seeded`: the task's `seed.json` (a hand-written harness) is imported before every session,
  nothing refines it: the expert reference.
* replay arms (`plan_without`): a recorded harness is copied in, optionally with one refinement
  rolled back, and the sessions run without refinement.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from continual_eval.checks import cells_from_frames
from continual_eval.client import AcpStdioClient, ClientError
from continual_eval.measure import SessionResult, measure_session
from continual_eval.proxy import RecordingProxy
from continual_eval.repo_guard import RepoSnapshot
from continual_eval.scripted import TaskModel
from continual_eval.task import Task, TaskError

ARMS = ("learning", "frozen", "seeded")
DEFAULT_REFINE = (
    "Keep what this session learned about this project that a later session will need: commands, "
    "conventions, pitfalls and their fixes. Nothing else."
)
REFINE_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Endpoint:
    """Where the model is: the scripted one (per task), or a real OpenAI-compatible endpoint."""

    scripted: bool
    base_url: str | None = None
    model: str = "scripted-model"
    api_key: str | None = None
    refine_model: str | None = None
    extra_env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ArmPlan:
    name: str
    refine: bool
    harness: str  # "carry" | "empty" | "seed" | "copy"
    copy_from: Path | None = None
    rollback: str | None = None


def plan_arm(name: str) -> ArmPlan:
    if name == "learning":
        return ArmPlan(name, refine=True, harness="carry")
    if name == "frozen":
        return ArmPlan(name, refine=False, harness="empty")
    if name == "seeded":
        return ArmPlan(name, refine=False, harness="seed")
    raise TaskError(f"unknown arm {name!r}; arms: {', '.join(ARMS)}")


@dataclass
class RunOptions:
    out: Path
    endpoint: Endpoint
    sessions: int | None = None  # overrides each task's count
    max_turn_requests: int | None = None  # overrides each task's [limits] (slow local models)
    prompt_timeout: float | None = None
    server_argv: tuple[str, ...] = (sys.executable, "-m", "acp_server")
    keep_work: bool = False
    progress: Callable[[str], None] = lambda line: None


def _server_env(arm_dir: Path, endpoint: Endpoint, base_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONTINUAL_ACP_", "OPENAI_"))}
    env.update(
        HOME=str(arm_dir / "user"),  # no skills or config of the person running the eval leak in
        CONTINUAL_ACP_HOME=str(arm_dir / "home"),
        XDG_CONFIG_HOME=str(arm_dir / "config"),
        XDG_DATA_HOME=str(arm_dir / "user" / ".local" / "share"),
        OPENAI_BASE_URL=base_url,
        OPENAI_API_KEY=endpoint.api_key or "eval",
        CONTINUAL_ACP_MODEL=endpoint.model,
        CONTINUAL_ACP_KERNEL_POOL="0",  # one session per server: a warm spare kernel would be waste
        # The tasks' scripts and checkers call `python3`: the interpreter running the eval.
        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    )
    if endpoint.refine_model:
        env["CONTINUAL_ACP_REFINE_MODEL"] = endpoint.refine_model
    env.update(dict(endpoint.extra_env))
    for key in ("NO_PROXY", "no_proxy"):  # the proxy is on loopback
        env[key] = ",".join(filter(None, ["127.0.0.1,localhost", env.get(key)]))
    return env


def _write_config(arm_dir: Path, task: Task, plan: ArmPlan) -> None:
    folder = arm_dir / "config" / "continual-acp"
    folder.mkdir(parents=True, exist_ok=True)
    lines = ['mode = "auto"', 'refine_review = "never"']
    if not plan.refine:
        lines.append("auto_refine_every = 0")
    if task.max_turn_requests:
        lines.append(f"max_turn_requests = {task.max_turn_requests}")
    (folder / "config.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (arm_dir / "user").mkdir(exist_ok=True)


def _cli(
    argv: Sequence[str], env: dict[str, str], server_argv: Sequence[str]
) -> subprocess.CompletedProcess[str]:
    """`continual-acp <argv>` as a process, with the arm's data dir (the same program as the server)."""
    return subprocess.run([*server_argv, *argv], env=env, capture_output=True, text=True, timeout=120)


def _prepare_harness(
    plan: ArmPlan, task: Task, arm_dir: Path, env: dict[str, str], server_argv: Sequence[str]
) -> None:
    harness = arm_dir / "home" / "harness"
    if plan.harness == "empty" or plan.harness == "seed":
        shutil.rmtree(harness, ignore_errors=True)
    if plan.harness == "seed":
        if task.seed is None:
            raise TaskError(f"task {task.name} has no seed.json for the seeded arm")
        done = _cli(
            ["harness", "import", str(task.seed), "--scope", "global", "--no-verify"], env, server_argv
        )
        if done.returncode != 0:
            raise TaskError(
                f"{task.seed}: the harness import failed: {done.stderr.strip() or done.stdout.strip()}"
            )


def _copy_harness(plan: ArmPlan, arm_dir: Path, env: dict[str, str], server_argv: Sequence[str]) -> None:
    """A replay arm's harness: the recorded one, with `plan.rollback` undone when set."""
    assert plan.copy_from is not None
    harness = arm_dir / "home" / "harness"
    shutil.rmtree(harness, ignore_errors=True)
    harness.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(plan.copy_from, harness)
    if plan.rollback:
        done = _cli(["harness", "rollback", plan.rollback, "--force"], env, server_argv)
        if done.returncode != 0:
            raise TaskError(
                f"rolling back {plan.rollback} failed: {done.stderr.strip() or done.stdout.strip()}"
            )


def _history_lines(arm_dir: Path) -> list[str]:
    path = arm_dir / "home" / "harness" / "refinements.jsonl"
    if not path.is_file():
        return []
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


async def _session(
    client: AcpStdioClient, task: Task, plan: ArmPlan, session: int, repo: Path, meta: dict[str, Any]
) -> None:
    await client.request(
        "initialize",
        {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False},
            "clientInfo": {"name": "continual-acp-eval", "version": "1"},
        },
    )
    created = await client.request("session/new", {"cwd": str(repo), "mcpServers": []})
    session_id = str(created["sessionId"])
    meta["session_id"] = session_id
    prompt = task.prompt_for(session)
    started = time.monotonic()
    try:
        answer = await client.request(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": prompt}]},
            timeout=task.prompt_timeout,
        )
    except ClientError:
        meta["wall_seconds"] = time.monotonic() - started
        meta["task_updates"] = len(client.updates)
        # A prompt past its limit is cancelled as an editor would, so the server can exit cleanly.
        await client.notify("session/cancel", {"sessionId": session_id})
        raise
    meta["wall_seconds"] = time.monotonic() - started
    meta["stop_reason"] = answer.get("stopReason")
    meta["task_updates"] = len(client.updates)
    if plan.refine:
        instructions = task.refine_instructions or DEFAULT_REFINE
        started = time.monotonic()
        # A skill check runs the skill's examples in the repository: it is put back afterwards.
        snapshot = await asyncio.to_thread(RepoSnapshot.take, repo)
        try:
            await client.request(
                "session/prompt",
                {
                    "sessionId": session_id,
                    "prompt": [{"type": "text", "text": f"/refine --global {instructions}"}],
                },
                timeout=REFINE_TIMEOUT_S,
            )
            await client.request(
                "_harness/await_quiescence", {"sessionId": session_id, "timeoutMs": 120_000}, timeout=130
            )
        finally:
            meta["refine_changed_repo"] = await asyncio.to_thread(snapshot.restore)
        meta["refine_seconds"] = time.monotonic() - started


async def run_arm(
    task: Task, plan: ArmPlan, options: RunOptions, work: Path, proxy: RecordingProxy, base_url: str
) -> list[SessionResult]:
    task = replace(
        task,
        max_turn_requests=options.max_turn_requests or task.max_turn_requests,
        prompt_timeout=options.prompt_timeout or task.prompt_timeout,
    )
    arm_dir = work / task.name / plan.name
    arm_dir.mkdir(parents=True, exist_ok=True)
    traces = options.out / "traces" / task.name / plan.name
    traces.mkdir(parents=True, exist_ok=True)
    _write_config(arm_dir, task, plan)
    env = _server_env(arm_dir, options.endpoint, base_url)
    if plan.harness == "copy":
        _copy_harness(plan, arm_dir, env, options.server_argv)
    sessions = options.sessions or task.sessions
    results: list[SessionResult] = []
    repo = arm_dir / "repo"
    for session in range(1, sessions + 1):
        folder = traces / f"session-{session}"
        folder.mkdir(parents=True, exist_ok=True)
        if plan.harness in ("empty", "seed"):
            _prepare_harness(plan, task, arm_dir, env, options.server_argv)
        if session == 1 or task.reset == "session":
            task.build(repo)
        before = _history_lines(arm_dir)
        meta: dict[str, Any] = {
            "task": task.name,
            "arm": plan.name,
            "session": session,
            "prompt": task.prompt_for(session),
            "limits": {"max_turn_requests": task.max_turn_requests, "prompt_timeout": task.prompt_timeout},
        }
        with (
            (folder / "frames.jsonl").open("w", encoding="utf-8") as frames,
            (folder / "server.log").open("w", encoding="utf-8") as stderr,
            (folder / "model.jsonl").open("w", encoding="utf-8") as model_log,
        ):
            proxy.set_log(model_log, task=task.name, arm=plan.name, session=session)
            client = await AcpStdioClient.spawn(
                options.server_argv, env=env, cwd=repo, frames=frames, stderr=stderr
            )
            try:
                await _session(client, task, plan, session, repo, meta)
            except ClientError as exc:
                meta["error"] = str(exc)
            finally:
                meta["exit_code"] = await client.close()
                proxy.set_log(None)
        after = _history_lines(arm_dir)
        (folder / "harness-diff.jsonl").write_text(
            "".join(line + "\n" for line in after[len(before) :]), encoding="utf-8"
        )
        transcript = arm_dir / "home" / "sessions" / str(meta.get("session_id")) / "transcript.jsonl"
        if transcript.is_file():
            shutil.copyfile(transcript, folder / "transcript.jsonl")
        checked = task.check(repo, cells_from_frames(folder / "frames.jsonl"))
        (folder / "checker.json").write_text(json.dumps(checked.record(), indent=2), encoding="utf-8")
        (folder / "session.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
        result = measure_session(folder, task=task.name, arm=plan.name, session=session)
        results.append(result)
        options.progress(
            f"{task.name:<28} {plan.name:<10} session {session}: {'pass' if result.passed else 'FAIL'}  "
            f"{result.agent_requests} requests  {result.tokens} tokens  {result.harness_entries_in_prompt} entries"
            + (f"  error: {result.error}" if result.error else "")
        )
    harness = arm_dir / "home" / "harness"
    if harness.is_dir():
        shutil.copytree(
            harness, traces / "harness", dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.lock")
        )
    return results


async def run_tasks(
    tasks: Sequence[Task], plans: Sequence[ArmPlan], options: RunOptions
) -> list[SessionResult]:
    """Every task in every arm; results in task, arm, session order."""
    from agent_core.testing.scripted_model import ScriptedModelServer

    results: list[SessionResult] = []
    work = Path(tempfile.mkdtemp(prefix="continual-eval-"))
    try:
        for task in tasks:
            for plan in plans:
                if plan.harness == "seed" and task.seed is None:
                    options.progress(f"{task.name:<28} {plan.name:<10} skipped: the task has no seed.json")
                    continue
                if options.endpoint.scripted:
                    if task.scripted is None:
                        raise TaskError(f"task {task.name} has no [scripted] section; run it against a model")
                    model = ScriptedModelServer(responder=TaskModel(task.scripted)).start()
                    upstream = model.base_url
                else:
                    model = None
                    assert options.endpoint.base_url is not None
                    upstream = options.endpoint.base_url
                try:
                    with RecordingProxy(upstream) as proxy:
                        results += await run_arm(task, plan, options, work, proxy, proxy.base_url)
                finally:
                    if model is not None:
                        model.stop()
    finally:
        if options.keep_work:
            options.progress(f"work dirs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return results


def run(tasks: Sequence[Task], plans: Sequence[ArmPlan], options: RunOptions) -> list[SessionResult]:
    return asyncio.run(run_tasks(tasks, plans, options))
