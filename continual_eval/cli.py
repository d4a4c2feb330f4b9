"""`continual-acp eval ...`: run a suite, compare runs, replay a task without one refinement.

continual-acp eval [SUITE] [--tasks a,b] [--sessions K] [--arms learning,frozen] [--out DIR]
                   [--mode task|stream] [--orders N] [--seeds N] [--temperature T] [--jobs N] [--resume]
                   [--server-command "CMD ARGS"]
                   (--scripted | --base-url URL --model ID [--refine-model ID])
continual-acp eval --without r-<id> --from RUN_DIR [--out DIR] [--scripted | --base-url ...]
continual-acp eval report RUN_DIR [RUN_DIR ...]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from continual_eval.jsonl import read_jsonl
from continual_eval.proxy import CostMeter
from continual_eval.report import compare_runs
from continual_eval.results import write_run
from continual_eval.runner import ARMS, MODES, ArmPlan, Endpoint, RunOptions, plan_arm, run
from continual_eval.task import Task, TaskError, bundled_suite, bundled_suites, load_suite

if TYPE_CHECKING:
    from agent_core.config.loader import AgentConfig


def _suite(given: str | None) -> Path:
    """A bundled suite by name (a folder of that name in the working directory wins), else a path."""
    if not given:
        return bundled_suite()
    path = Path(given)
    if not path.exists() and given in bundled_suites():
        return bundled_suite(given)
    return path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="continual-acp eval",
        description="Run a suite of tasks over several sessions, with and without the continual harness.",
        epilog="continual-acp eval report RUN_DIR [RUN_DIR ...] compares runs.",
    )
    parser.add_argument(
        "suite",
        nargs="?",
        help="a bundled suite's name (pipeline: the pipeline test, the default; lessons: tasks only a "
        "remembered lesson solves, with held-out variants and controls), a task folder or a folder of tasks",
    )
    parser.add_argument("--tasks", default="", help="comma-separated task names to run (default: all)")
    parser.add_argument("--sessions", type=int, help="sessions per task (default: each task's own)")
    parser.add_argument("--max-turn-requests", type=int, help="model requests per prompt, for every task")
    parser.add_argument("--prompt-timeout", type=float, help="seconds per task prompt, for every task")
    parser.add_argument("--arms", default="learning,frozen", help=f"comma-separated, of {', '.join(ARMS)}")
    parser.add_argument("--out", type=Path, help="run directory (default: eval-results/<time>-<model>)")
    parser.add_argument(
        "--scripted", action="store_true", help="each task's scripted model (offline pipeline test)"
    )
    parser.add_argument(
        "--base-url", default=os.environ.get("OPENAI_BASE_URL"), help="OpenAI-compatible endpoint"
    )
    parser.add_argument("--model", default=os.environ.get("CONTINUAL_ACP_MODEL"), help="model id")
    parser.add_argument("--refine-model", default=os.environ.get("CONTINUAL_ACP_REFINE_MODEL"))
    parser.add_argument(
        "--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the key"
    )
    parser.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment for the server (e.g. CONTINUAL_ACP_ACTION_FORMAT=text); repeatable",
    )
    parser.add_argument(
        "--server-command",
        metavar='"CMD ARGS"',
        help="the command that starts a server, split as a shell splits words (nothing is run through a "
        "shell); the eval appends the server's arguments, for every session's server and for its "
        "`harness` calls. Paths in ARGS are read from the task's repository: make them absolute "
        "(default: this interpreter's `python -m acp_server`)",
    )
    parser.add_argument(
        "--without", metavar="REFINEMENT_ID", help="replay the task with this refinement removed"
    )
    parser.add_argument("--from", dest="from_run", type=Path, help="the run whose harness --without replays")
    parser.add_argument("--keep-work", action="store_true", help="keep the repositories and data dirs")
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="task",
        help="task: each task's sessions with its own harness; stream: the suite in one order with ONE "
        "harness per arm, then every task again",
    )
    parser.add_argument(
        "--orders", type=int, default=3, help="stream mode: orders (the suite's, then shuffles)"
    )
    parser.add_argument(
        "--seeds", type=int, default=0, help="N runs of everything, seed 1..N sent to the endpoint"
    )
    parser.add_argument("--temperature", type=float, help="sampling temperature sent with every request")
    parser.add_argument("--jobs", type=int, default=1, help="independent streams run at once")
    parser.add_argument(
        "--resume", action="store_true", help="continue the run in --out from its finished sessions"
    )
    return parser


def _endpoint(args: argparse.Namespace) -> Endpoint:
    extra: list[tuple[str, str]] = []
    for item in args.server_env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise TaskError(f"--server-env wants KEY=VALUE; got {item!r}")
        extra.append((key, value))
    if args.scripted:
        return Endpoint(scripted=True, extra_env=tuple(extra))
    configured = _configured()  # config.toml (and `setup`), as `serve` and `doctor` read it
    base_url = args.base_url or configured.base_url
    model = args.model or configured.model
    if not base_url or not model:
        raise TaskError(
            "name the model: --base-url URL --model ID (or OPENAI_BASE_URL, CONTINUAL_ACP_MODEL, or "
            "`base_url` and `model` in config.toml: `continual-acp setup`), or --scripted"
        )
    api_key = os.environ.get(args.api_key_env) or configured.api_key
    endpoint = Endpoint(
        scripted=False,
        base_url=base_url,
        model=model,
        api_key=api_key,
        refine_model=args.refine_model or configured.refine_model,
        extra_env=tuple(extra),
    )
    _check_reachable(base_url, api_key)
    return endpoint


def _server_argv(given: str | None) -> tuple[str, ...]:
    """`--server-command` as an argv, its program checked (and a relative path made absolute: the
    servers run in the task's repository) before anything runs."""
    if given is None:
        return (sys.executable, "-m", "acp_server")
    try:
        argv = shlex.split(given)
    except ValueError as exc:
        raise TaskError(f"--server-command {given!r}: {exc}") from None
    if not argv:
        raise TaskError("--server-command is empty; give the command that starts a server")
    program = argv[0]
    if os.sep in program:
        found: str | None = os.path.abspath(program)
        if not (os.path.isfile(program) and os.access(program, os.X_OK)):
            found = None
    else:
        found = shutil.which(program)
    if found is None:
        raise TaskError(f"--server-command: {program!r} is not an executable program (or not on PATH)")
    return (found, *argv[1:])


def _configured() -> AgentConfig:
    from agent_core.config.loader import load_config

    try:
        return load_config()
    except ValueError as exc:
        raise TaskError(str(exc)) from None


def _check_reachable(base_url: str, api_key: str | None, timeout: float = 10.0) -> None:
    """TaskError naming `base_url` when nothing answers there: a run against a down endpoint would
    fail every session and report the eval's own loopback proxy, not the user's URL."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(base_url.rstrip("/") + "/models", method="GET")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout):
            return
    except urllib.error.HTTPError:
        return  # it answered (a 401 or 404 is still an endpoint)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise TaskError(
            f"the model endpoint {base_url} does not answer ({reason}); start it or fix the URL"
        ) from None


def _run_name(endpoint: Endpoint, suffix: str = "") -> str:
    model = (
        "scripted"
        if endpoint.scripted
        else "".join(c if c.isalnum() or c in "-._" else "-" for c in endpoint.model)
    )
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"-{model}{suffix}"


def _replay_plans(args: argparse.Namespace, tasks: Sequence[Task]) -> tuple[list[Task], list[ArmPlan]]:
    """The task whose recorded learning harness holds the refinement, and the two replay arms."""
    if args.from_run is None:
        raise TaskError("--without needs --from RUN_DIR (the run that recorded the refinement)")
    traces = args.from_run / "traces"
    for task in tasks:
        folder = traces / task.name
        # An arm's harness: traces/<task>/<arm>/harness, or per seed traces/<task>/<arm>/seed-<s>/harness.
        harnesses = sorted([*folder.glob("*/harness"), *folder.glob("*/seed-*/harness")])
        for arm_dir in (h.parent for h in harnesses):
            history = read_jsonl(arm_dir / "harness" / "refinements.jsonl")
            if any(record.get("id") == args.without for record in history):
                # The recorded arm's own sessions are the "with" side; only the "without" side runs.
                plan = ArmPlan(
                    f"without-{args.without}",
                    refine=False,
                    harness="copy",
                    copy_from=arm_dir / "harness",
                    rollback=args.without,
                )
                return [task], [plan]
    raise TaskError(f"no task in {args.from_run} recorded refinement {args.without}")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["report"]:
        if any(a in ("-h", "--help") for a in argv[1:]):
            print(
                "usage: continual-acp eval report RUN_DIR [RUN_DIR ...]\n\n"
                "Compare eval runs: each RUN_DIR is a directory an eval run wrote (it holds results.json)."
            )
            return 0
        if len(argv) < 2:
            print("usage: continual-acp eval report RUN_DIR [RUN_DIR ...]", file=sys.stderr)
            return 2
        try:
            sys.stdout.write(compare_runs([Path(p) for p in argv[1:]]))
        except ValueError as exc:
            print(f"continual-acp eval report: {exc}", file=sys.stderr)
            return 2
        return 0
    args = _parser().parse_args(argv)
    try:
        server_argv = _server_argv(args.server_command)
        endpoint = _endpoint(args)
        suite = _suite(args.suite)
        only = [n.strip() for n in args.tasks.split(",") if n.strip()]
        tasks = load_suite(suite, only)
        if args.sessions is not None and args.sessions < 1:
            raise TaskError(f"--sessions must be at least 1; got {args.sessions}")
        if args.max_turn_requests is not None and args.max_turn_requests < 1:
            raise TaskError(f"--max-turn-requests must be at least 1; got {args.max_turn_requests}")
        if args.prompt_timeout is not None and args.prompt_timeout <= 0:
            raise TaskError(
                f"--prompt-timeout must be a positive number of seconds; got {args.prompt_timeout}"
            )
        if args.without and args.mode == "stream":
            raise TaskError("--without replays one task's sessions; it has no stream mode")
        if args.without:
            tasks, plans = _replay_plans(args, tasks)
            name = _run_name(endpoint, f"-without-{args.without}")
        else:
            plans = [plan_arm(a.strip()) for a in args.arms.split(",") if a.strip()]
            if not plans:
                raise TaskError("--arms names no arm")
            name = _run_name(endpoint)
    except TaskError as exc:
        print(f"continual-acp eval: {exc}", file=sys.stderr)
        return 2
    for flag, value, least in (
        ("--orders", args.orders, 1),
        ("--seeds", args.seeds, 0),
        ("--jobs", args.jobs, 1),
    ):
        if value < least:
            print(f"continual-acp eval: {flag} must be at least {least}; got {value}", file=sys.stderr)
            return 2
    if args.resume and args.out is None:
        print("continual-acp eval: --resume needs --out RUN_DIR (the interrupted run)", file=sys.stderr)
        return 2
    out = args.out or Path("eval-results") / name
    # What must match for a resumed run to be the same run (the rest, e.g. --jobs, may change).
    shape = {
        "suite": str(suite),
        "tasks": [t.name for t in tasks],
        "arms": [p.name for p in plans],
        "sessions": args.sessions,
        "mode": args.mode,
        "orders": args.orders if args.mode == "stream" else None,
        "seeds": args.seeds,
        "temperature": args.temperature,
        "scripted": endpoint.scripted,
        "model": endpoint.model,
        "without": args.without,
    }
    if args.resume:
        try:
            recorded = json.loads((out / "run.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            print(f"continual-acp eval: {out} holds no run to resume (no run.json)", file=sys.stderr)
            return 2
        changed = sorted(k for k in shape if recorded.get(k) != shape[k])
        if changed:
            print(
                f"continual-acp eval: {out} was run with other {', '.join(changed)}; resume with the same "
                "arguments",
                file=sys.stderr,
            )
            return 2
        (out / "results.json").unlink(missing_ok=True)
    elif (out / "results.json").exists() or (out / "traces").exists():
        # Old traces beside new results would make figures that cannot be recomputed.
        print(f"continual-acp eval: {out} already holds a run; choose another --out", file=sys.stderr)
        return 2
    else:
        out.mkdir(parents=True, exist_ok=True)
        (out / "run.json").write_text(json.dumps(shape, indent=2) + "\n", encoding="utf-8")
    options = RunOptions(
        out=out,
        endpoint=endpoint,
        sessions=args.sessions,
        max_turn_requests=args.max_turn_requests,
        prompt_timeout=args.prompt_timeout,
        server_argv=server_argv,
        keep_work=args.keep_work,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
        mode=args.mode,
        orders=args.orders,
        seeds=args.seeds,
        temperature=args.temperature,
        jobs=args.jobs,
        resume=args.resume,
        meter=CostMeter(report=lambda line: print(line, file=sys.stderr, flush=True)),
    )
    print(f"continual-acp eval: {len(tasks)} task(s) x {len(plans)} arm(s) -> {out}", file=sys.stderr)
    try:
        results = run(tasks, plans, options)
    except TaskError as exc:
        print(f"continual-acp eval: {exc}", file=sys.stderr)
        return 2
    document = write_run(
        out,
        results,
        {
            "run": out.name,
            "scripted": endpoint.scripted,
            "model": endpoint.model,
            "endpoint": endpoint.base_url or "scripted (per task, loopback)",
            "suite": str(suite),
            "arms": [p.name for p in plans],
            "tasks": [t.name for t in tasks],
            "without": args.without,
            "replayed_from": str(args.from_run) if args.without else None,
            "mode": args.mode,
            "orders": args.orders if args.mode == "stream" else None,
            "seeds": args.seeds,
            "temperature": args.temperature,
        },
    )
    sys.stdout.write(compare_runs([out]))
    for regression in document["regressions"]:
        print(
            f"regression: {regression['task']} ({regression['arm']}) failed in session {regression['session']} "
            f"after refinement(s) {', '.join(regression['refinement_ids'])}",
            file=sys.stderr,
        )
    print(options.meter.line() + " (this process)", file=sys.stderr)
    print(f"results: {out / 'results.md'}", file=sys.stderr)
    return 0
