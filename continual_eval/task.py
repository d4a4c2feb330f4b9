"""The task format: a folder with `task.toml`, a template repository, the checker's files.

    my-task/
      task.toml        name, prompts, sessions, checker command, limits, optional seed and script
      repo/            copied as the task's repository (the template)
      setup.sh         optional: run with bash in the copy after the template (git init, generated files)
      checker/         optional: copied over the repository just before the checker runs, so an agent
                       that edited the checker or its tests scores nothing
      seed.json        optional: the harness of the `seeded` arm (a proposal, as `harness import` reads)
      misleading.json  optional: a plausible wrong lesson, same shape, for the `misleading` arm

A task may belong to a family (`family`, `variant`, `held_out`: the same lesson under other names
and files) or be a control (`control = "nothing-to-learn"` or `"impossible"`). Its checker decides
on the outcome (the command) and on the trace (`[checker.trace]`, rules over the session's cells,
see checks.py); an `impossible` task's only pass is a cheat.

Loading validates everything and raises `TaskError` naming the file and the key; a task that loads
can be built and checked. The format is documented for users in docs/eval.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from continual_eval.checks import Cell, TraceRules, judge, problems_text, rules_from
from host_base.process_groups import kill_group

CHECKER_TIMEOUT_S = 120.0
SETUP_TIMEOUT_S = 120.0
OUTPUT_LIMIT = 8_000  # characters of checker output kept in the results (head and tail)
RESETS = ("session", "arm")
CONTROLS = ("nothing-to-learn", "impossible")
SUITES_DIR = Path(__file__).resolve().parent / "tasks"


class TaskError(ValueError):
    """A task folder that cannot be used; the message names the file and what is wrong."""


@dataclass(frozen=True)
class ScriptedBehaviour:
    """How the scripted model plays this task (a pipeline test of the harness, not a model).

    The agent looks for `knows` in the system prompt's harness section: present, it runs the
    `informed` cells; absent, the `naive` ones. The planner writes the lesson (`lesson_title`,
    `lesson`) only when the trajectory it is shown contains `learned_from`: a memory, or with
    `lesson_kind = "skill"` a skill calling `lesson_reference` (`import`, `callable`) with the
    `lesson_arguments` contract.
    """

    knows: str
    lesson_title: str
    lesson: str
    learned_from: str
    naive: tuple[str, ...]
    informed: tuple[str, ...]
    answer: str = "Done."
    lesson_kind: str = "memory"
    lesson_reference: dict[str, str] | None = None
    lesson_arguments: dict[str, Any] | None = None
    lesson_examples: tuple[dict[str, Any], ...] = ()  # a skill's examples: its check runs them


@dataclass(frozen=True)
class CheckResult:
    """The checker's verdict. `passed` is an honest pass: the outcome command passed, the trace
    broke no rule, and the task is not impossible. `cheated`: the outcome passed but the trace shows
    a shortcut (`problems`), or the task is impossible so any pass is a cheat."""

    passed: bool
    exit_code: int | None  # None: it did not finish (timeout) or could not start
    output: str
    seconds: float
    outcome_passed: bool = False
    cheated: bool = False
    problems: tuple[str, ...] = ()

    def record(self) -> dict[str, Any]:
        """What `checker.json` holds."""
        return {
            "passed": self.passed,
            "exit_code": self.exit_code,
            "seconds": self.seconds,
            "output": self.output,
            "outcome_passed": self.outcome_passed,
            "cheated": self.cheated,
            "problems": list(self.problems),
        }


@dataclass(frozen=True)
class Task:
    name: str
    folder: Path
    description: str
    prompts: tuple[str, ...]
    sessions: int
    checker_command: str
    checker_timeout: float = CHECKER_TIMEOUT_S
    reset: str = "session"
    max_turn_requests: int | None = None
    prompt_timeout: float = 600.0
    refine_instructions: str | None = None
    seed: Path | None = None
    scripted: ScriptedBehaviour | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)
    suite: str = ""
    family: str | None = None
    variant: str | None = None
    held_out: bool = False  # a variant whose prompts never carry the lesson: it measures transfer
    control: str | None = None  # "nothing-to-learn" | "impossible"
    trace: TraceRules = field(default_factory=TraceRules)
    misleading: Path | None = None

    @property
    def impossible(self) -> bool:
        return self.control == "impossible"

    def prompt_for(self, session: int) -> str:
        """The prompt of session `session` (1-based): the list's entry, the last one repeating."""
        return self.prompts[min(session, len(self.prompts)) - 1]

    @property
    def template(self) -> Path:
        return self.folder / "repo"

    @property
    def checker_files(self) -> Path:
        return self.folder / "checker"

    def build(self, dest: Path) -> Path:
        """A fresh repository at `dest`: the template copied, then `setup.sh` run in it."""
        if dest.exists():
            shutil.rmtree(dest)
        if self.template.is_dir():
            shutil.copytree(self.template, dest, symlinks=True)
        else:
            dest.mkdir(parents=True)
        setup = self.folder / "setup.sh"
        if setup.is_file():
            result = subprocess.run(
                ["bash", str(setup.resolve())],  # the task folder may be given relative to here
                cwd=dest,
                capture_output=True,
                text=True,
                timeout=SETUP_TIMEOUT_S,
                env=_quiet_git_env(),
            )
            if result.returncode != 0:
                raise TaskError(
                    f"{setup}: exited with {result.returncode}: {_bounded(result.stderr + result.stdout)}"
                )
        return dest

    def check(self, repo: Path, cells: Sequence[Cell] | None = None) -> CheckResult:
        """The outcome (the checker command in `repo`, its files restored first) and the trace
        (`cells`, the session's cells: `checks.cells_from_frames`; None when there is no trace,
        which fails a task with trace rules)."""
        problems: list[str] = []
        if not self.trace.empty:
            # Before the checker's files are restored: a weakened file is seen as the agent left it.
            with tempfile.TemporaryDirectory(prefix="continual-eval-original-") as scratch:
                original = self.build(Path(scratch) / "repo") if self.trace.unchanged else None
                problems = judge(self.trace, cells, repo, original)
        outcome = self._run_checker(repo)
        if self.impossible and outcome.passed:
            problems.append("the task is impossible: a pass can only come from a cheat")
        output = outcome.output + ("\n" + problems_text(problems) if problems else "")
        return CheckResult(
            passed=outcome.passed and not problems,
            exit_code=outcome.exit_code,
            output=output,
            seconds=outcome.seconds,
            outcome_passed=outcome.passed,
            cheated=outcome.passed and bool(problems),
            problems=tuple(problems),
        )

    def _run_checker(self, repo: Path) -> CheckResult:
        """Restore the checker's files from the task, then run the checker in `repo` as a process."""
        if self.checker_files.is_dir():
            shutil.copytree(self.checker_files, repo, dirs_exist_ok=True)
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                ["bash", "-c", self.checker_command],
                cwd=repo,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=_quiet_git_env(),
                start_new_session=True,  # its own process group: a timeout kills what it started too
            )
        except OSError as exc:
            return CheckResult(False, None, f"the checker could not start: {exc}", 0.0)
        try:
            output, _ = proc.communicate(timeout=self.checker_timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc.pid)
            output, _ = proc.communicate()
            seconds = time.monotonic() - started
            note = f"\n[checker killed after {self.checker_timeout:g} s]"
            return CheckResult(False, None, _bounded(output or "") + note, seconds)
        return CheckResult(
            proc.returncode == 0, proc.returncode, _bounded(output), time.monotonic() - started
        )


def _quiet_git_env() -> dict[str, str]:
    env = dict(os.environ)
    # `python3` in a setup script or checker is the interpreter running the eval (the server's too).
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.setdefault("GIT_AUTHOR_NAME", "eval")
    env.setdefault("GIT_AUTHOR_EMAIL", "eval@example.invalid")
    env.setdefault("GIT_COMMITTER_NAME", "eval")
    env.setdefault("GIT_COMMITTER_EMAIL", "eval@example.invalid")
    return env


def _bounded(text: str, limit: int = OUTPUT_LIMIT) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} characters cut ...]\n{text[-half:]}"


def _get(
    table: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str, default: Any = None
) -> Any:
    value = table.get(key, default)
    if value is None:
        return None
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise TaskError(f"{where}: {key} must be {_kind_name(kind)}; got {value!r}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", int: "a whole number", float: "a number", list: "a list", dict: "a table"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _strings(table: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = table.get(key)
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TaskError(f"{where}: {key} must be a string or a list of strings; got {value!r}")
    return tuple(value)


def _scripted(table: Any, where: str) -> ScriptedBehaviour | None:
    if table is None:
        return None
    if not isinstance(table, dict):
        raise TaskError(f"{where}: [scripted] must be a table")
    here = f"{where} [scripted]"
    missing = [k for k in ("knows", "lesson", "learned_from", "naive", "informed") if k not in table]
    if missing:
        raise TaskError(f"{here}: missing {', '.join(missing)}")
    naive, informed = _strings(table, "naive", here), _strings(table, "informed", here)
    if not naive or not informed:
        raise TaskError(f"{here}: naive and informed need at least one cell each")
    kind = _get(table, "lesson_kind", str, here, "memory")
    reference: dict[str, str] | None = None
    arguments: dict[str, Any] | None = None
    examples: tuple[dict[str, Any], ...] = ()
    if kind == "skill":
        raw = table.get("lesson_reference")
        if not (
            isinstance(raw, dict)
            and all(isinstance(raw.get(k), str) and raw[k] for k in ("import", "callable"))
        ):
            raise TaskError(
                f'{here}: a skill lesson needs lesson_reference = {{ import = "...", callable = "..." }}'
            )
        reference = {"import": raw["import"], "callable": raw["callable"]}
        arguments = _get(table, "lesson_arguments", dict, here, {})
        raw_examples = _get(table, "lesson_examples", list, here, [])
        if not all(isinstance(e, dict) for e in raw_examples):
            raise TaskError(f"{here}: lesson_examples must be a list of tables")
        examples = tuple(raw_examples)
    elif kind != "memory":
        raise TaskError(f"{here}: lesson_kind must be memory or skill, not {kind!r}")
    return ScriptedBehaviour(
        knows=_get(table, "knows", str, here),
        lesson_title=_get(table, "lesson_title", str, here, "Project note"),
        lesson=_get(table, "lesson", str, here),
        learned_from=_get(table, "learned_from", str, here),
        naive=naive,
        informed=informed,
        answer=_get(table, "answer", str, here, "Done."),
        lesson_kind=kind,
        lesson_reference=reference,
        lesson_arguments=arguments,
        lesson_examples=examples,
    )


def load_task(folder: Path) -> Task:
    """The task in `folder` (its `task.toml`), validated; raises `TaskError`."""
    path = folder / "task.toml"
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise TaskError(f"{folder}: no task.toml") from None
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(f"{path}: not valid TOML: {exc}") from None
    where = str(path)
    prompts = _strings(data, "prompts", where) or _strings(data, "prompt", where)
    if not prompts:
        raise TaskError(f'{where}: needs prompt = "..." or prompts = [...]')
    checker = data.get("checker")
    if not isinstance(checker, dict) or not isinstance(checker.get("command"), str):
        raise TaskError(f'{where}: needs a [checker] table with command = "..."')
    limits = data.get("limits", {})
    if not isinstance(limits, dict):
        raise TaskError(f"{where}: [limits] must be a table")
    sessions = _get(data, "sessions", int, where, 3)
    if sessions < 1:
        raise TaskError(f"{where}: sessions must be at least 1; got {sessions}")
    reset = _get(data, "reset", str, where, "session")
    if reset not in RESETS:
        raise TaskError(f"{where}: reset must be one of {', '.join(RESETS)}; got {reset!r}")
    seed_name = _get(data, "seed", str, where)
    seed = (
        folder / seed_name
        if seed_name
        else (folder / "seed.json" if (folder / "seed.json").is_file() else None)
    )
    if seed is not None and not seed.is_file():
        raise TaskError(f"{where}: seed file {seed} does not exist")
    misleading = folder / "misleading.json" if (folder / "misleading.json").is_file() else None
    for proposal in (seed, misleading):
        if proposal is not None:
            _check_proposal(proposal)
    try:
        trace = rules_from(_get(checker, "trace", dict, f"{where} [checker]", {}), f"{where} [checker.trace]")
    except ValueError as exc:
        raise TaskError(str(exc)) from None
    control = _get(data, "control", str, where)
    if control is not None and control not in CONTROLS:
        raise TaskError(f"{where}: control must be one of {', '.join(CONTROLS)}; got {control!r}")
    family = _get(data, "family", str, where)
    variant = _get(data, "variant", str, where)
    if (family is None) != (variant is None):
        raise TaskError(f"{where}: family and variant go together")
    turn_requests = _get(limits, "max_turn_requests", int, f"{where} [limits]")
    return Task(
        name=_get(data, "name", str, where, folder.name),
        folder=folder,
        description=_get(data, "description", str, where, ""),
        prompts=prompts,
        sessions=sessions,
        checker_command=checker["command"],
        checker_timeout=float(
            _get(checker, "timeout", (int, float), f"{where} [checker]", CHECKER_TIMEOUT_S)
        ),
        reset=reset,
        max_turn_requests=turn_requests,
        prompt_timeout=float(_get(limits, "prompt_timeout", (int, float), f"{where} [limits]", 600.0)),
        refine_instructions=_get(data, "refine_instructions", str, where),
        seed=seed,
        scripted=_scripted(data.get("scripted"), where),
        tags=_strings(data, "tags", where),
        suite=_get(data, "suite", str, where, folder.parent.name),
        family=family,
        variant=variant,
        held_out=bool(_get(data, "held_out", bool, where, False)),
        control=control,
        trace=trace,
        misleading=misleading,
    )


def _check_proposal(path: Path) -> None:
    """A seed or misleading file: a JSON object with a list of edits (what `harness import` reads)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TaskError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("edits"), list) or not data["edits"]:
        raise TaskError(f"{path}: needs an object with a non-empty edits list")


def in_family_order(tasks: Sequence[Task]) -> list[Task]:
    """Tasks in the order a run carrying one harness across them needs: each family's told variant
    before its held-out ones (families by name), then tasks of no family, then the controls."""

    def key(task: Task) -> tuple[int, str, bool, str]:
        group = 2 if task.control else (0 if task.family else 1)
        return (group, task.family or "", task.held_out, task.variant or task.name)

    return sorted(tasks, key=key)


def bundled_suites() -> list[str]:
    """The names of the suites shipped with the package (`pipeline`, `lessons`)."""
    return sorted(p.name for p in SUITES_DIR.iterdir() if p.is_dir() and not p.name.startswith("."))


def bundled_suite(name: str = "pipeline") -> Path:
    """The folder of a suite shipped with the package (default: the pipeline test)."""
    path = SUITES_DIR / name
    if "/" in name or name.startswith(".") or not path.is_dir():
        raise TaskError(f"unknown suite {name!r}; bundled suites: {', '.join(bundled_suites())}")
    return path


def load_suite(path: Path | str, only: Sequence[str] = ()) -> list[Task]:
    """A task folder, a folder of task folders (sorted by name), or the name of a bundled suite
    (`pipeline`, `lessons`); `only` keeps those names."""
    if isinstance(path, str):
        path = bundled_suite(path) if path in bundled_suites() else Path(path)
    if (path / "task.toml").is_file():
        tasks = [load_task(path)]
    elif path.is_dir():
        tasks = [load_task(child) for child in sorted(path.iterdir()) if (child / "task.toml").is_file()]
    else:
        raise TaskError(f"{path}: no such suite (a task folder or a folder of task folders)")
    if not tasks:
        raise TaskError(f"{path}: no task folders (folders with a task.toml)")
    if only:
        names = {t.name for t in tasks}
        unknown = [n for n in only if n not in names]
        if unknown:
            raise TaskError(f"unknown task(s) {', '.join(unknown)}; the suite has {', '.join(sorted(names))}")
        tasks = [t for t in tasks if t.name in only]
    return tasks
