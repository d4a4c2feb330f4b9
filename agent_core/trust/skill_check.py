"""Verified skills: a `skill` create/update is run in a scratch kernel before the store writes it.

The check takes a fresh kernel from a `KernelPool` (no session state: a pooled kernel is never
shared), applies the session's cwd and sys.path, and runs one cell that

1. imports `reference.import`,
2. finds `reference.callable` and checks it is callable,
3. checks its signature accepts the `arguments` contract (every declared argument is a parameter
   or swallowed by `**kwargs`; every parameter without a default is declared), and
4. runs the entry's `examples` (`{"args": [...], "kwargs": {...}}` plus `"expect": <value>`,
   `"predicate": "<python expression over result>"` or `"raises": "<ExceptionName>"`),

all bounded by a timeout; the kernel is discarded afterwards. The cell's printed lines are the
check's output: the refinement card shows them (a refused edit's error text, or the applied edit's
`check` note).

`SkillCheckService` runs the checker on its own event-loop thread, so the store's synchronous
pre-apply verifier (`harness_store.verify`) can call it from any thread: the coordinator's worker
threads, the CLI, a test. `verify_enabled` reads `verify_skills` from config.toml (`false`, or a
table per scope `{local = true, global = false, project = true}`); a store with checks switched off
gets `disabled_verifier`, whose note says so on every skill it lets through.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness_store import HarnessEntry
from harness_store.verify import PreApplyVerifier, Verdict

if TYPE_CHECKING:
    from agent_core.session import Session
    from kernel_bridge import KernelPool

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 10.0
OUTPUT_CHARS = 2_000
_MARK = "__continual_acp_skill_check__ "
OFF_NOTE = "not verified: verify_skills is off"

# Runs in the scratch kernel. Self-contained (the kernel has none of our packages), prints one
# line per step and a final marker line with the verdict as JSON.
_CHECK_SOURCE = r"""
def __cacp_skill_check(spec):
    import importlib, inspect, json, os, sys, threading
    mark = spec["mark"]
    written = []
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    def note(path):
        if isinstance(path, (str, bytes, os.PathLike)) and len(written) < 200:
            written.append(os.path.abspath(os.fsdecode(path)))
    def audit(event, args):
        if event == "open" and len(args) >= 3:
            mode, flags = args[1], args[2]
            if (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & write_flags
            ):
                note(args[0])
        elif event in ("os.remove", "os.rmdir", "os.mkdir", "os.truncate", "os.chmod", "shutil.rmtree"):
            note(args[0])
        elif event in ("os.rename", "os.link", "os.symlink") and len(args) >= 2:
            note(args[0])
            note(args[1])
        elif event == "subprocess.Popen" and len(written) < 200:
            written.append("(process) " + " ".join(map(str, args[1] or ()))[:200] if len(args) > 1 else "(process)")
    sys.addaudithook(audit)  # the kernel is discarded after the check: the hook goes with it
    def done(ok, stage):
        print(mark + json.dumps({"ok": ok, "stage": stage, "written": sorted(set(written))}), flush=True)
    module_name, name = spec["import"], spec["callable"]
    try:
        module = importlib.import_module(module_name)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        print(f"import {module_name}: failed: {type(exc).__name__}: {exc}", flush=True)
        return done(False, "import")
    print(f"import {module_name}: ok", flush=True)
    target = module
    try:
        for part in name.split("."):
            target = getattr(target, part)
    except AttributeError:
        print(f"callable {name}: not found in {module_name}", flush=True)
        return done(False, "callable")
    if not callable(target):
        print(f"callable {name}: {type(target).__name__} is not callable", flush=True)
        return done(False, "callable")
    print(f"callable {name}: ok", flush=True)
    contract = spec["arguments"] if isinstance(spec["arguments"], dict) else {}
    if contract.get("type") == "object" and isinstance(contract.get("properties"), dict):
        declared = list(contract["properties"])
    else:
        declared = list(contract)
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        sig = None
        print(f"signature of {name}: not inspectable; skipped", flush=True)
    if sig is not None:
        P = inspect.Parameter
        params = sig.parameters
        var_kw = any(p.kind is P.VAR_KEYWORD for p in params.values())
        problems = []
        for arg in declared:
            p = params.get(arg)
            if p is None and not var_kw:
                problems.append(f"declared argument {arg!r} is not a parameter")
            elif p is not None and p.kind in (P.POSITIONAL_ONLY, P.VAR_POSITIONAL, P.VAR_KEYWORD):
                problems.append(f"declared argument {arg!r} cannot be passed by name")
        for p in params.values():
            if p.default is P.empty and p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY):
                if p.name not in declared:
                    problems.append(f"parameter {p.name!r} has no default and is not in the arguments contract")
        if problems:
            print(f"signature {name}{sig}: " + "; ".join(problems), flush=True)
            return done(False, "signature")
        print(f"signature {name}{sig}: accepts {', '.join(declared) or 'no arguments'}", flush=True)
    def settle(value):
        if inspect.isawaitable(value):
            import asyncio
            box = {}
            def run():
                try:
                    box["value"] = asyncio.run(_await(value))
                except BaseException as exc:
                    box["error"] = exc
            async def _await(v):
                return await v
            t = threading.Thread(target=run, daemon=True)
            t.start()
            t.join()
            if "error" in box:
                raise box["error"]
            return box["value"]
        return value
    def jsonish(value):
        try:
            return json.loads(json.dumps(value, default=str))
        except (TypeError, ValueError):
            return value
    examples = spec["examples"]
    for number, example in enumerate(examples, start=1):
        args = example.get("args") or []
        kwargs = example.get("kwargs") or {}
        shown = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
        call = f"{name}({shown})"
        print(f"example {number}: {call}", flush=True)
        try:
            result = settle(target(*args, **kwargs))
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            if example.get("raises") and type(exc).__name__ == example["raises"]:
                print(f"example {number}: raised {type(exc).__name__} as expected", flush=True)
                continue
            print(f"example {number}: raised {type(exc).__name__}: {exc}", flush=True)
            return done(False, "examples")
        if example.get("raises"):
            print(f"example {number}: returned {result!r}, expected {example['raises']}", flush=True)
            return done(False, "examples")
        if "expect" in example:
            expected = example["expect"]
            if not (result == expected or jsonish(result) == expected):
                print(f"example {number}: returned {result!r}, expected {expected!r}", flush=True)
                return done(False, "examples")
        if example.get("predicate"):
            try:
                holds = eval(example["predicate"], {"__builtins__": __builtins__}, {"result": result})
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                print(f"example {number}: predicate {example['predicate']!r} raised {type(exc).__name__}: {exc}", flush=True)
                return done(False, "examples")
            if not holds:
                print(f"example {number}: returned {result!r}; predicate {example['predicate']!r} is false", flush=True)
                return done(False, "examples")
        print(f"example {number}: ok ({result!r})"[:400], flush=True)
    done(True, "passed")
"""


@dataclass(frozen=True)
class SkillCheck:
    """The outcome of checking one skill: passed or not, at which stage, and the printed lines."""

    ok: bool
    stage: str  # import | callable | signature | examples | timeout | kernel | writes | passed
    output: str
    duration: float
    # Paths the check's code opened for writing, removed, renamed or created (an audit hook in the
    # scratch kernel), and "(process) argv" for each process it started.
    written: tuple[str, ...] = ()

    def verdict(self) -> Verdict:
        """The store's view of this check (the note or refusal text starts with the verdict)."""
        if self.ok:
            head = "verified in a scratch kernel"
        elif self.stage == "timeout":
            head = "timed out"
        elif self.stage == "writes":
            head = "refused"
        else:
            head = f"{self.stage} check failed"
        return Verdict(self.ok, f"{head} ({self.duration:.2f} s)\n{self.output}".rstrip())


def check_code(entry: HarnessEntry, *, mark: str = _MARK) -> str:
    """The cell that checks `entry` (see the module docstring)."""
    spec = {
        "mark": mark,
        "import": str(entry.reference.get("import", "")),
        "callable": str(entry.reference.get("callable", "")),
        "arguments": entry.arguments,
        "examples": list(entry.examples),
    }
    payload = json.dumps(spec, default=str)
    return (
        _CHECK_SOURCE
        + f"__cacp_skill_check(__import__('json').loads({payload!r}))\n"
        + "del __cacp_skill_check\n"
    )


def _parse(output: str, status: str, timeout: float, duration: float) -> SkillCheck:
    lines: list[str] = []
    verdict: dict[str, Any] | None = None
    for line in output.splitlines():
        if line.startswith(_MARK):
            try:
                verdict = json.loads(line[len(_MARK) :])
            except ValueError:
                verdict = None
        elif line.strip():
            lines.append(line)
    text = "\n".join(lines)
    if len(text) > OUTPUT_CHARS:
        text = text[: OUTPUT_CHARS // 2] + "\n[...]\n" + text[-OUTPUT_CHARS // 2 :]
    if verdict is not None and isinstance(verdict.get("ok"), bool):
        raw = verdict.get("written")
        written = tuple(str(p) for p in raw) if isinstance(raw, list) else ()
        return SkillCheck(bool(verdict["ok"]), str(verdict.get("stage") or "?"), text, duration, written)
    if status == "interrupted":
        last = next((ln for ln in reversed(lines) if not ln.startswith("[")), "the check")
        message = f"the check did not finish within {timeout:g} s (stopped during: {last})"
        return SkillCheck(False, "timeout", f"{text}\n{message}".strip(), duration)
    return SkillCheck(
        False, "kernel", f"{text}\nthe check ended without a verdict ({status})".strip(), duration
    )


class SkillChecker:
    """Checks skills in scratch kernels taken from `pool` (each kernel is used once, then discarded)."""

    def __init__(self, pool: KernelPool, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.pool = pool
        self.timeout = timeout
        self._closing: set[asyncio.Task[None]] = set()

    async def check(
        self,
        entry: HarnessEntry,
        *,
        cwd: str | os.PathLike[str],
        sys_path: Sequence[str] = (),
        protected: Sequence[str] = (),
    ) -> SkillCheck:
        """Run the check cell for `entry` in a fresh kernel with `cwd` and `sys_path`; a skill that
        writes `.continual-acp/` (gates, the project harness) or a `protected` path is refused."""
        from agent_core.autonomy.tamper import TamperWatch, restore
        from agent_core.control_plane.guard import CONTROL_DIR, ControlPlaneGuard

        guard = ControlPlaneGuard([Path(cwd) / CONTROL_DIR])
        guard.ensure_baseline()
        # The protected paths too, by content: a process the skill starts is not seen by the hook.
        watch = (
            await asyncio.to_thread(TamperWatch.start, cwd, patterns=(), gates=(), protected=protected)
            if protected
            else None
        )
        try:
            check = await self._run(entry, cwd=cwd, sys_path=sys_path)
            held = guard.check("skill-check", entry.id, when="during its skill check")
        finally:
            guard.close()
        touched: list[str] = []
        if watch is not None:
            changed = (await asyncio.to_thread(watch.changes)).protected
            failed = restore(watch, changed)
            touched = [
                f"{c.path}: the protected path {c.path}" + ("" if c.path in failed else " (restored)")
                for c in changed
            ]
        return refuse_writes(check, Path(cwd), protected, held.files if held else (), touched)

    async def _run(
        self, entry: HarnessEntry, *, cwd: str | os.PathLike[str], sys_path: Sequence[str] = ()
    ) -> SkillCheck:
        started = time.monotonic()
        try:
            kernel = await self.pool.acquire(cwd=cwd, sys_path=sys_path)
        except Exception as exc:
            return SkillCheck(False, "kernel", f"no scratch kernel: {exc}", time.monotonic() - started)
        try:
            run = kernel.execute(check_code(entry), timeout=self.timeout)
            try:
                # The kernel interrupts the cell at the timeout; the margin covers a kill + report.
                result = await asyncio.wait_for(run.result(), self.timeout + 15.0)
                output, status = result.output, result.status
            except TimeoutError:
                output, status = "", "interrupted"
        finally:
            # Discard the kernel off the critical path: the verdict does not wait for its shutdown.
            task = asyncio.get_running_loop().create_task(kernel.shutdown(final_snapshot=False))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        return _parse(output, status, self.timeout, time.monotonic() - started)

    async def aclose(self) -> None:
        """Wait for discarded kernels to finish shutting down."""
        if self._closing:
            await asyncio.gather(*list(self._closing), return_exceptions=True)


def refuse_writes(
    check: SkillCheck,
    cwd: Path,
    protected: Sequence[str],
    control_plane: Sequence[Any] = (),
    touched: Sequence[str] = (),
) -> SkillCheck:
    """`check`, refused when the skill wrote the control plane (`control_plane`: what the
    before/after comparison found and restored) or a path under `.continual-acp/` or `protected`."""
    from agent_core.control_plane.guard import CONTROL_DIR

    root = cwd.resolve()
    fences = [(root / CONTROL_DIR, ".continual-acp/ (gates, the project harness)")]
    fences += [
        ((root / p).resolve() if not Path(p).is_absolute() else Path(p), f"the protected path {p}")
        for p in protected
    ]
    bad: list[str] = [
        f"{held.path}: .continual-acp/ (gates, the project harness; restored)" for held in control_plane
    ]
    bad += touched
    for path in check.written:
        if path.startswith("(process)"):
            continue
        target = Path(path)
        with contextlib.suppress(OSError):
            target = target.parent.resolve() / target.name
        for fence, what in fences:
            if target == fence or fence in target.parents:
                bad.append(f"{path}: {what}")
                break
    if not bad:
        return check
    listed = "\n".join(f"- {line}" for line in sorted(set(bad)))
    reason = f"the skill writes paths a skill must not change:\n{listed}"
    return SkillCheck(False, "writes", f"{check.output}\n{reason}".strip(), check.duration, check.written)


class SkillCheckService:
    """A `SkillChecker` on its own event-loop thread with its own small `KernelPool`.

    `verifier(cwd, sys_path)` is a synchronous `PreApplyVerifier` for `HarnessStore.apply`; it may
    be called from any thread but this service's own. Start is lazy (first check); `close()` stops
    the kernels and the thread.
    """

    def __init__(
        self,
        *,
        pool_size: int = 1,
        python: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        pool: KernelPool | None = None,
    ) -> None:
        self.pool_size = pool_size
        self.python = python
        self.timeout = timeout
        self._pool = pool
        self._checker: SkillChecker | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=run, name="skill-check", daemon=True)
                self._thread.start()
                ready.wait()
                self._loop = loop
                asyncio.run_coroutine_threadsafe(self._start(), loop).result()
            return self._loop

    async def _start(self) -> None:
        if self._pool is None:
            from kernel_bridge import (
                KernelPool,  # deferred: jupyter_client is a slow import
                workspace_launch,
            )

            # The launch seam's kernel launcher when the backend confines kernels (a sandbox tier):
            # the skill's code then runs as confined as the session's own cells.
            confined = workspace_launch.confinement_source()
            options: dict[str, Any] = {} if confined is None else {"launcher": confined}
            self._pool = KernelPool(self.pool_size, python=self.python, refill_delay=0.0, **options)
        await self._pool.start()
        self._checker = SkillChecker(self._pool, timeout=self.timeout)

    def warm(self) -> None:
        """Start the loop and the pool now (the first check then finds a kernel warming)."""
        self._ensure()

    def ready_count(self) -> int:
        """How many warm kernels wait in the pool (0 before the first check or `warm`)."""
        return self._pool.ready_count if self._pool is not None else 0

    def check(
        self,
        entry: HarnessEntry,
        *,
        cwd: str | os.PathLike[str],
        sys_path: Sequence[str] = (),
        protected: Sequence[str] = (),
    ) -> SkillCheck:
        """Check `entry` (blocks the calling thread, never this service's loop)."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("SkillCheckService.check called from its own loop thread")
        loop = self._ensure()
        assert self._checker is not None
        future = asyncio.run_coroutine_threadsafe(
            self._checker.check(entry, cwd=cwd, sys_path=sys_path, protected=protected), loop
        )
        # A cold start (empty pool) may take a while on a loaded machine; the check itself is bounded.
        return future.result(timeout=self.timeout + 180.0)

    def verifier(
        self, cwd: str | os.PathLike[str], sys_path: Sequence[str] = (), protected: Sequence[str] = ()
    ) -> PreApplyVerifier:
        """The store's pre-apply verifier for skills of a session in `cwd`."""

        def verify(entry: HarnessEntry) -> Verdict:
            return self.check(entry, cwd=cwd, sys_path=sys_path, protected=protected).verdict()

        return verify

    def close(self) -> None:
        """Shut the pool's kernels and the loop thread down (idempotent)."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is None:
            return

        async def stop() -> None:
            if self._checker is not None:
                await self._checker.aclose()
            if self._pool is not None:
                await self._pool.aclose()

        try:
            asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=60)
        except Exception:
            log.exception("stopping the skill check pool failed")
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        loop.close()


def disabled_verifier(note: str = OFF_NOTE) -> PreApplyVerifier:
    """A verifier that lets every skill through, saying so on the applied edit."""

    def verify(entry: HarnessEntry) -> Verdict:
        return Verdict(True, note)

    return verify


def refusing_verifier(reason: str) -> PreApplyVerifier:
    """A verifier that refuses every skill with `reason` (a check that cannot run lets nothing in)."""

    def verify(entry: HarnessEntry) -> Verdict:
        return Verdict(False, reason)

    return verify


def verify_enabled(extra: Mapping[str, Any], scope: str) -> bool:
    """`verify_skills` from config.toml: a bool for every store, or a table by scope (default on)."""
    from agent_core.config.table import value as setting

    value = setting(extra, "verify_skills")
    if isinstance(value, Mapping):
        value = value.get(scope, True)
    return bool(value)


_shared: SkillCheckService | None = None
_shared_lock = threading.Lock()


def shared_service(python: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> SkillCheckService:
    """The process's skill check service (one small pool for every session), closed at exit."""
    global _shared
    with _shared_lock:
        if _shared is None:
            import atexit

            _shared = SkillCheckService(python=python, timeout=timeout)
            atexit.register(_shared.close)
        return _shared


def verifier_for(
    extra: Mapping[str, Any],
    scope: str,
    cwd: str | os.PathLike[str],
    *,
    python: str | None = None,
    sys_path: Sequence[str] = (),
) -> PreApplyVerifier:
    """The verifier a store of `scope` gets: the shared service's, or the "off" note per config."""
    if not verify_enabled(extra, scope):
        return disabled_verifier()
    from agent_core.config.table import value as setting

    timeout = setting(extra, "skill_check_timeout")
    protected = tuple(setting(extra, "protected_paths"))
    return shared_service(python, float(timeout)).verifier(cwd, sys_path, protected)


def session_verifiers(session: Session) -> Callable[[str], PreApplyVerifier]:
    """scope -> verifier for one session's refinements (its cwd; config from its agent config)."""
    config = session.agent_config

    def for_scope(scope: str) -> PreApplyVerifier:
        return verifier_for(config.extra, scope, session.cwd, python=config.kernel_python)

    return for_scope


def cli_verifier_factory() -> Any:
    """`(scope, cwd) -> verifier` for `continual-acp harness import` (config from config.toml)."""

    def factory(scope: str, cwd: Any) -> PreApplyVerifier:
        from agent_core.config.loader import load_config

        config = load_config()
        return verifier_for(config.extra, scope, cwd, python=config.kernel_python)

    return factory
