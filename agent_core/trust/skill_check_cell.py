"""The cell a skill check runs in the scratch kernel (`check_code`: import, callable, signature against
the `arguments` contract, examples, and an audit hook recording what the code wrote or started) and
its printed output read back into a `SkillCheck` (`parse_output`: the verdict line, a timeout, or a
kernel that ended without one). trust/skill_check.py runs it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from harness_store import HarnessEntry
from harness_store.verify import Verdict

OUTPUT_CHARS = 2_000
_MARK = "__continual_acp_skill_check__ "

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


def parse_output(output: str, status: str, timeout: float, duration: float) -> SkillCheck:
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
