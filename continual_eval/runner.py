"""Runs tasks x arms x sessions through the real server over stdio and writes the traces.

The run is cut into **units**, each an independent sequence of sessions with its own data dir
(`CONTINUAL_ACP_HOME`), config dir, HOME, recording proxy and (scripted) model:

* per-task mode (default): one unit per (task, arm, seed): the task's K sessions in sequence;
* stream mode (`mode="stream"`): one unit per (order, arm, seed): the suite's tasks in that order,
  one session each, with ONE harness, then every task again in the same order (round 2).

Each session is one server process (`python -m acp_server`, as an editor launches it, or the
`--server-command` given; `server_argv`, also what runs the `harness` CLI calls): initialize,
session/new in the task's repository (built fresh from the task, or once per unit with
`reset = "arm"` in per-task mode), the prompt, then, in arms that refine, `/refine --global`, then end
of input. The checker runs after the server has exited. Units share nothing, so `jobs > 1` runs them
in threads at once with the same results; a session folder with `done` in it is finished, and
`resume` continues a unit after its last finished session from the harness snapshot that session
left (`harness-after/`).

Arms:
* `learning`: the harness carries over from session to session; refinement runs (`/refine` after
  each session, and the product's automatic triggers as configured); review is off so edits apply.
* `frozen`: the baseline: the harness is emptied before every session, nothing triggers refinement.
* `seeded`: the task's `seed.json` (a hand-written harness) is imported before every session,
  nothing refines it: the expert reference.
* `learning+curate`: `learning` with the curator's deterministic pass (`continual-acp harness curate
  --scope global --apply`) between sessions, before every session but the unit's first; the pass's
  report is kept as `curate.json` beside the session's traces, and how many entries it took out of
  the prompt is the row's `curated`.
* `learning+replay`: `learning` with `refine_verify = "replay"`: a proposed edit that claims to fix
  a failed step applies only when its replay (the step re-run with and without the edit in scratch
  checkouts, then the gates) shows it helps. It needs a model that can redo the task's steps.
* `misleading`: the task's `misleading.json` (a plausible wrong lesson) is imported before the
  task's first session, then the arm learns as `learning` does: does the harness recover from it?
  A task without one is skipped in this arm.
* replay arms (`plan_without`): a recorded harness is copied in, optionally with one refinement
  rolled back, and the sessions run without refinement.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from continual_eval.checks import cells_from_frames
from continual_eval.client import AcpStdioClient, ClientError
from continual_eval.measure import SessionResult, measure_session
from continual_eval.proxy import CostMeter, RecordingProxy
from continual_eval.repo_guard import RepoSnapshot
from continual_eval.scripted import TaskModel
from continual_eval.task import Task, TaskError

ARMS = ("learning", "frozen", "seeded", "misleading", "learning+curate", "learning+replay")
MODES = ("task", "stream")
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
    harness: str  # "carry" | "empty" | "seed" | "copy" | "misleading"
    copy_from: Path | None = None
    rollback: str | None = None
    curate: bool = False  # the curator's pass between sessions
    replay: bool = False  # `refine_verify = "replay"`: a proposed fix applies only if its replay helps


def plan_arm(name: str) -> ArmPlan:
    if name == "learning":
        return ArmPlan(name, refine=True, harness="carry")
    if name == "frozen":
        return ArmPlan(name, refine=False, harness="empty")
    if name == "seeded":
        return ArmPlan(name, refine=False, harness="seed")
    if name == "misleading":
        return ArmPlan(name, refine=True, harness="misleading")
    if name == "learning+curate":
        return ArmPlan(name, refine=True, harness="carry", curate=True)
    if name == "learning+replay":
        return ArmPlan(name, refine=True, harness="carry", replay=True)
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
    mode: str = "task"  # "task": one unit per task; "stream": the suite in one order, one harness
    orders: int = 3  # stream mode: how many orders (the first is the suite's, then seeded shuffles)
    seeds: int = 0  # 0: one run, nothing sent; N: runs with seed 1..N sent to the endpoint
    temperature: float | None = None  # sent to the endpoint with every request when set
    jobs: int = 1
    resume: bool = False
    meter: CostMeter = field(default_factory=CostMeter)


def misleading_of(task: Task) -> Path | None:
    """The task's misleading lesson (a proposal as `harness import` reads), when it has one."""
    declared = task.misleading
    if isinstance(declared, Path):
        return declared if declared.is_file() else None
    path = task.folder / "misleading.json"
    return path if path.is_file() else None


def stream_orders(tasks: Sequence[Task], count: int) -> list[tuple[Task, ...]]:
    """The suite's order, then seeded shuffles (the same orders on every run and machine)."""
    orders: list[tuple[Task, ...]] = [tuple(tasks)]
    rng = random.Random(20261203)
    attempts = 0
    while len(orders) < count:
        shuffled = list(tasks)
        rng.shuffle(shuffled)
        attempts += 1
        # Distinct orders while there are some left to find (2 tasks have only 2).
        if tuple(shuffled) not in orders or attempts > 50:
            orders.append(tuple(shuffled))
    return orders


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
    if plan.replay:
        lines.append('refine_verify = "replay"')
    if task.max_turn_requests:
        lines.append(f"max_turn_requests = {task.max_turn_requests}")
    (folder / "config.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (arm_dir / "user").mkdir(exist_ok=True)


def _cli(
    argv: Sequence[str], env: dict[str, str], server_argv: Sequence[str]
) -> subprocess.CompletedProcess[str]:
    """`continual-acp <argv>` as a process, with the arm's data dir (the same program as the server)."""
    try:
        return subprocess.run([*server_argv, *argv], env=env, capture_output=True, text=True, timeout=120)
    except OSError as exc:
        raise TaskError(f"the server command {shlex.join(server_argv)} cannot be started: {exc}") from None


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


@dataclass(frozen=True)
class Step:
    """One session of a unit: which task, with which prompt, where its traces go."""

    task: Task
    session: int  # 1-based, in the unit's sequence
    round: int  # per-task mode: the session number; stream mode: 1, or 2 for the re-run
    position: int  # stream mode: the task's place in the order (1-based); per-task mode: 1
    folder: Path  # its traces


@dataclass(frozen=True)
class Unit:
    """An independent sequence of sessions: its own data dir, proxy and model."""

    plan: ArmPlan
    steps: tuple[Step, ...]
    seed: int | None
    stream: int | None  # the order's number in stream mode
    name: str  # its work dir's name

    @property
    def tasks(self) -> list[Task]:
        return list({step.task.name: step.task for step in self.steps}.values())


def _skip_reason(task: Task, plan: ArmPlan) -> str | None:
    if plan.harness == "seed" and task.seed is None:
        return "the task has no seed.json"
    if plan.harness == "misleading" and misleading_of(task) is None:
        return "the task has no misleading.json"
    return None


def plan_units(tasks: Sequence[Task], plans: Sequence[ArmPlan], options: RunOptions) -> list[Unit]:
    """Every unit of the run, in the order the results are written (the same with any `jobs`)."""
    seeds: list[int | None] = list(range(1, options.seeds + 1)) if options.seeds else [None]
    units: list[Unit] = []
    traces = options.out / "traces"
    if options.mode == "stream":
        for number, order in enumerate(stream_orders(tasks, options.orders), start=1):
            for plan in plans:
                for seed in seeds:
                    base = traces / f"stream-{number}" / plan.name
                    base = base / f"seed-{seed}" if seed is not None else base
                    kept = [t for t in order if _skip_reason(t, plan) is None]
                    steps = tuple(
                        Step(
                            task,
                            (rnd - 1) * len(kept) + pos,
                            rnd,
                            pos,
                            base / f"{(rnd - 1) * len(kept) + pos:02d}-{task.name}",
                        )
                        for rnd in (1, 2)
                        for pos, task in enumerate(kept, start=1)
                    )
                    if steps:
                        units.append(Unit(plan, steps, seed, number, f"stream-{number}-{plan.name}-{seed}"))
        return units
    for task in tasks:
        for plan in plans:
            if _skip_reason(task, plan) is not None:
                continue
            for seed in seeds:
                base = traces / task.name / plan.name
                base = base / f"seed-{seed}" if seed is not None else base
                count = options.sessions or task.sessions
                steps = tuple(Step(task, k, k, 1, base / f"session-{k}") for k in range(1, count + 1))
                units.append(Unit(plan, steps, seed, None, f"{task.name}-{plan.name}-{seed}"))
    return units


def _limited(task: Task, options: RunOptions) -> Task:
    return replace(
        task,
        max_turn_requests=options.max_turn_requests or task.max_turn_requests,
        prompt_timeout=options.prompt_timeout or task.prompt_timeout,
    )


async def _session(
    client: AcpStdioClient, task: Task, plan: ArmPlan, prompt: str, repo: Path, meta: dict[str, Any]
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


def _import(proposal: Path, env: dict[str, str], server_argv: Sequence[str]) -> None:
    done = _cli(["harness", "import", str(proposal), "--scope", "global", "--no-verify"], env, server_argv)
    if done.returncode != 0:
        raise TaskError(
            f"{proposal}: the harness import failed: {done.stderr.strip() or done.stdout.strip()}"
        )


def _curate(env: dict[str, str], server_argv: Sequence[str], folder: Path) -> dict[str, Any]:
    """The curator's deterministic pass over the global harness, applied; its report is kept in
    `curate.json`. Returns what the session's `session.json` records of it."""
    done = _cli(["harness", "curate", "--scope", "global", "--apply", "--json"], env, server_argv)
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        report = None
    if done.returncode != 0 or not isinstance(report, dict):
        raise TaskError(f"the curator's pass failed: {done.stderr.strip() or done.stdout.strip()}")
    (folder / "curate.json").write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    actions = [a for a in report.get("actions") or [] if isinstance(a, dict)]
    return {
        "actions": len(actions),
        "out_of_prompt": sum(a.get("action") in ("archive", "merge") for a in actions),
    }


def _snapshot(arm_dir: Path, dest: Path) -> None:
    harness = arm_dir / "home" / "harness"
    if harness.is_dir():
        shutil.copytree(harness, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.lock"))


def _finished(step: Step) -> bool:
    return (step.folder / "done").is_file()


class _Switch:
    """The scripted responder of a stream unit: plays the task of the session under way."""

    def __init__(self) -> None:
        self.current: TaskModel | None = None

    def __call__(self, body: dict[str, Any]) -> Any:
        assert self.current is not None
        return self.current(body)


async def run_unit(unit: Unit, options: RunOptions, work: Path) -> list[SessionResult]:
    """One unit's sessions in sequence; finished ones are read back when resuming."""
    from agent_core.testing.scripted_model import ScriptedModelServer

    plan = unit.plan
    arm_dir = work / unit.name
    if arm_dir.exists():
        shutil.rmtree(arm_dir)
    arm_dir.mkdir(parents=True)
    results: list[SessionResult] = []
    done = 0
    if options.resume:
        while done < len(unit.steps) and _finished(unit.steps[done]):
            done += 1
        # A repository kept across sessions (`reset = "arm"`) is gone with the old work dir: start over.
        if done and any(s.task.reset == "arm" for s in unit.steps) and unit.stream is None:
            done = 0
    for step in unit.steps[done:]:
        if step.folder.exists():
            shutil.rmtree(step.folder)  # an interrupted session's partial traces
    for step in unit.steps[:done]:
        results.append(_measure(step, unit))
    if done == len(unit.steps):
        return results
    _write_config(arm_dir, _limited(unit.steps[0].task, options), plan)
    switch = _Switch()
    model = None
    if options.endpoint.scripted:
        for task in unit.tasks:
            if task.scripted is None:
                raise TaskError(f"task {task.name} has no [scripted] section; run it against a model")
        model = ScriptedModelServer(responder=switch).start()
        upstream = model.base_url
    else:
        assert options.endpoint.base_url is not None
        upstream = options.endpoint.base_url
    overrides: dict[str, Any] = {}
    if unit.seed is not None:
        overrides["seed"] = unit.seed
    if options.temperature is not None:
        overrides["temperature"] = options.temperature
    try:
        with RecordingProxy(upstream, overrides=overrides, meter=options.meter) as proxy:
            env = _server_env(arm_dir, options.endpoint, proxy.base_url)
            if plan.harness == "copy":
                _copy_harness(plan, arm_dir, env, options.server_argv)
            if done:
                _snapshot_restore(unit.steps[done - 1].folder / "harness-after", arm_dir)
            seen = {s.task.name for s in unit.steps[:done]}
            for step in unit.steps[done:]:
                task = _limited(step.task, options)
                if task.scripted is not None:
                    switch.current = TaskModel(task.scripted)
                first_time = task.name not in seen
                seen.add(task.name)
                results.append(await _run_step(unit, step, task, options, arm_dir, env, proxy, first_time))
    finally:
        if model is not None:
            model.stop()
    traces = unit.steps[-1].folder.parent
    _snapshot(arm_dir, traces / "harness")
    return results


def _snapshot_restore(snapshot: Path, arm_dir: Path) -> None:
    harness = arm_dir / "home" / "harness"
    shutil.rmtree(harness, ignore_errors=True)
    if snapshot.is_dir():
        harness.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(snapshot, harness)


def _measure(step: Step, unit: Unit) -> SessionResult:
    return measure_session(step.folder, task=step.task.name, arm=unit.plan.name, session=step.session)


async def _run_step(
    unit: Unit,
    step: Step,
    task: Task,
    options: RunOptions,
    arm_dir: Path,
    env: dict[str, str],
    proxy: RecordingProxy,
    first_time: bool,
) -> SessionResult:
    plan = unit.plan
    folder = step.folder
    folder.mkdir(parents=True, exist_ok=True)
    _write_config(arm_dir, task, plan)  # the task's own limits (a stream changes task each session)
    if plan.harness in ("empty", "seed"):
        _prepare_harness(plan, task, arm_dir, env, options.server_argv)
    if plan.harness == "misleading" and first_time:
        wrong = misleading_of(task)
        assert wrong is not None
        _import(wrong, env, options.server_argv)
    curation = None
    if plan.curate and step is not unit.steps[0]:
        curation = _curate(env, options.server_argv, folder)  # between the last session and this one
    repo = arm_dir / "repos" / task.name
    if unit.stream is not None or step.session == 1 or task.reset == "session":
        task.build(repo)
    before = _history_lines(arm_dir)
    prompt = task.prompt_for(step.round)
    meta: dict[str, Any] = {
        "task": task.name,
        "arm": plan.name,
        "session": step.session,
        "round": step.round,
        "position": step.position,
        "stream": unit.stream,
        "seed": unit.seed,
        "temperature": options.temperature,
        "family": task.family,
        "variant": task.variant,
        "control": _control(task),
        "prompt": prompt,
        "limits": {"max_turn_requests": task.max_turn_requests, "prompt_timeout": task.prompt_timeout},
        **({"curation": curation} if curation is not None else {}),
    }
    with (
        (folder / "frames.jsonl").open("w", encoding="utf-8") as frames,
        (folder / "server.log").open("w", encoding="utf-8") as stderr,
        (folder / "model.jsonl").open("w", encoding="utf-8") as model_log,
    ):
        proxy.set_log(model_log, task=task.name, arm=plan.name, session=step.session)
        try:
            client = await AcpStdioClient.spawn(
                options.server_argv, env=env, cwd=repo, frames=frames, stderr=stderr
            )
        except OSError as exc:  # the program vanished or cannot run: no session can, so the run stops
            raise TaskError(
                f"the server command {shlex.join(options.server_argv)} cannot be started: {exc}"
            ) from None
        try:
            await _session(client, task, plan, prompt, repo, meta)
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
    _snapshot(arm_dir, folder / "harness-after")
    (folder / "done").write_text("", encoding="utf-8")  # last: a folder without it is re-run on resume
    result = _measure(step, unit)
    where = f"stream {unit.stream} " if unit.stream is not None else ""
    seed = f" seed {unit.seed}" if unit.seed is not None else ""
    options.progress(
        f"{where}{task.name:<28} {plan.name:<10}{seed} session {step.session}: "
        f"{'pass' if result.passed else 'FAIL'}  {result.agent_requests} requests  {result.tokens} tokens  "
        f"{len(result.entries_followed)}/{result.harness_entries_in_prompt} entries followed  "
        f"[{options.meter.line()}]" + (f"  error: {result.error}" if result.error else "")
    )
    return result


def _control(task: Task) -> str | None:
    """`nothing-to-learn`, `impossible` or None: from the task's `control` field, else its tags."""
    declared = task.control
    if isinstance(declared, str) and declared:
        return declared
    for tag in task.tags:
        if tag in ("nothing-to-learn", "impossible"):
            return tag
    return None


def _run_unit_blocking(unit: Unit, options: RunOptions, work: Path) -> list[SessionResult]:
    return asyncio.run(run_unit(unit, options, work))


def run(tasks: Sequence[Task], plans: Sequence[ArmPlan], options: RunOptions) -> list[SessionResult]:
    """Every unit, `options.jobs` at a time; results in the units' planned order."""
    units = plan_units(tasks, plans, options)
    for task in tasks:
        for plan in plans:
            reason = _skip_reason(task, plan)
            if reason:
                options.progress(f"{task.name:<28} {plan.name:<10} skipped: {reason}")
    work = Path(tempfile.mkdtemp(prefix="continual-eval-"))
    try:
        if options.jobs <= 1:
            per_unit = [_run_unit_blocking(unit, options, work) for unit in units]
        else:
            lock = threading.Lock()
            progress = options.progress

            def said(line: str) -> None:
                with lock:
                    progress(line)

            shared = replace(options, progress=said)
            with ThreadPoolExecutor(max_workers=options.jobs) as pool:
                per_unit = list(pool.map(lambda u: _run_unit_blocking(u, shared, work), units))
    finally:
        if options.keep_work:
            options.progress(f"work dirs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return [result for results in per_unit for result in results]
