"""Tamper evidence for a gates' pass: which files the gates judge by changed while the loop ran.

A gate that passes because its tests were weakened is not evidence. When the loop starts, the
watch keeps the content of every workspace file that looks like a test or CI config (the
`test_patterns`), that a gate command names (a path in the command, the runner's config file) or
that is a `protected_paths` entry; when the gates pass it compares. The pass message and the plan
then list what changed with a diff stat; a change to a protected path makes the loop stop and ask.

Files that change what a test runner runs without being a test (`conftest.py`, `pytest.ini`,
`pyproject.toml`, `sitecustomize.py`, `*.pth`, a `pytest.py` or a module named like the gate's
runner: `shadowing`, from `RUNNER_FILES` and `runner_patterns`) count as protected paths. They are
also looked for outside git's listing (an ignored `conftest.py` is still loaded by pytest).
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
import os
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from agent_core.autonomy.fingerprint import IGNORED_DIRS, _is_virtualenv
from agent_core.autonomy.gates import Gate

if TYPE_CHECKING:
    from kernel_bridge.workspace_launch import RunResult

__all__ = ["Changed", "Evidence", "TamperWatch", "looks_like_test", "restore", "runner_patterns"]

MAX_FILE = 1 << 20  # bigger files are compared by digest only (no line counts)
MAX_TOTAL = 32 << 20
MAX_FILES = 20_000
_RUNNER_CONFIG = {
    "pytest": ("pyproject.toml", "setup.cfg", "pytest.ini", "tox.ini"),
    "tox": ("tox.ini",),
    "make": ("Makefile", "makefile", "GNUmakefile"),
    "npm": ("package.json",),
    "cargo": ("Cargo.toml",),
}
TESTS_CHANGED = "Tests changed while the loop ran — review before trusting this pass"


def runner_patterns(defaults: Sequence[str], modules: Iterable[str]) -> tuple[str, ...]:
    """`defaults` and, for each module name a gate runs as its runner, the file and package that
    would stand in for it in the workspace (`X.py`, `X/**`)."""
    extra = [p for name in modules for p in (f"{name}.py", f"{name}/**")]
    return tuple(dict.fromkeys([*defaults, *extra]))


def looks_like_test(rel: str, patterns: Sequence[str]) -> bool:
    """`rel` (a `/` path) matches a pattern rooted at any folder of it (`tests/**` matches
    `pkg/tests/x.py`; `conftest.py` matches `a/conftest.py`)."""
    matcher = _matcher(tuple(patterns))
    return matcher is not None and matcher.match(rel) is not None


@functools.lru_cache(maxsize=64)
def _matcher(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """One regular expression for `fnmatchcase` of any pattern against any folder-rooted tail
    (one match per path instead of one per pattern and tail: a large workspace is walked often)."""
    if not patterns:
        return None
    either = "|".join(fnmatch.translate(p) for p in patterns)
    return re.compile(f"(?:.*/)?(?:{either})", re.S)


@dataclass(frozen=True)
class Changed:
    path: str  # relative to the workspace
    added: int | None  # None: too large or binary to count
    removed: int | None
    why: str  # "test", "gate", "protected"
    note: str = ""  # said instead of the counts (what a shadowing file does)

    def line(self) -> str:
        counts = "changed" if self.added is None else f"+{self.added} -{self.removed}"
        return f"{self.path} | {self.note or counts}"


@dataclass(frozen=True)
class Evidence:
    changed: tuple[Changed, ...] = ()

    @property
    def protected(self) -> tuple[Changed, ...]:
        return tuple(c for c in self.changed if c.why == "protected")

    def stat(self) -> str:
        return "\n".join(c.line() for c in self.changed)

    def message(self) -> str:
        if not self.changed:
            return ""
        return f"{TESTS_CHANGED}:\n```text\n{self.stat()}\n```"


@dataclass
class TamperWatch:
    cwd: Path
    patterns: tuple[str, ...]
    gates: tuple[Gate, ...]
    protected: tuple[str, ...] = ()
    shadowing: tuple[str, ...] = ()  # patterns (as `patterns`) of files that count as protected
    _before: dict[str, bytes | None] = field(default_factory=dict)  # None: absent

    @classmethod
    def start(
        cls,
        cwd: str | os.PathLike[str],
        *,
        patterns: Sequence[str],
        gates: Sequence[Gate],
        protected: Sequence[str],
        shadowing: Sequence[str] = (),
    ) -> TamperWatch:
        """Keep the watched files' content now (blocking: call it in a worker thread)."""
        watch = cls(Path(cwd), tuple(patterns), tuple(gates), tuple(protected), tuple(shadowing))
        total = 0
        for rel in watch._watched():
            data = _read(watch.cwd / rel)
            if data is not None and (len(data) > MAX_FILE or total > MAX_TOTAL):
                data = b"\0digest:" + _digest(data)
            total += len(data or b"")
            watch._before[rel] = data
        return watch

    def _why(self, rel: str) -> str | None:
        if any(rel == p or rel.startswith(p.rstrip("/") + "/") for p in self._protected_rel()):
            return "protected"
        if self.shadowing and looks_like_test(rel, self.shadowing):
            return "protected"
        if looks_like_test(rel, self.patterns):
            return "test"
        if any(rel == d or rel.startswith(d + "/") for d in self._gate_deps()):
            return "gate"
        return None

    def _protected_rel(self) -> list[str]:
        out = []
        for raw in self.protected:
            path = Path(raw)
            if path.is_absolute():
                try:
                    raw = str(path.resolve().relative_to(self.cwd.resolve()))
                except ValueError:
                    continue
            out.append(raw.strip("/") or ".")
        return out

    def _gate_deps(self) -> list[str]:
        deps: set[str] = set()
        for gate in self.gates:
            try:
                words = shlex.split(gate.command)
            except ValueError:
                words = gate.command.split()
            for word in words:
                for runner, files in _RUNNER_CONFIG.items():
                    if os.path.basename(word) == runner or word == runner:
                        deps.update(files)
                candidate = word.split("::", 1)[0]
                if candidate and not candidate.startswith("-") and (self.cwd / candidate).exists():
                    try:
                        rel = (self.cwd / candidate).resolve().relative_to(self.cwd.resolve())
                    except (ValueError, OSError):
                        continue
                    if str(rel) != ".":
                        deps.add(rel.as_posix())
        return sorted(deps)

    def _watched(self) -> list[str]:
        found = {rel for rel in _protected_files(self.cwd, self._protected_rel())}
        if self.patterns or self.gates or self.shadowing:
            found.update(rel for rel in _workspace_files(self.cwd) if self._why(rel) is not None)
        if self.shadowing:
            found.update(_matching_files(self.cwd, self.shadowing))
        return sorted(found)

    def changes(self) -> Evidence:
        """What changed among the watched files since `start` (blocking)."""
        found: list[Changed] = []
        for rel in sorted(set(self._before) | set(self._watched())):
            why = self._why(rel)
            if why is None:
                continue
            before = self._before.get(rel)
            after = _read(self.cwd / rel)
            if before is not None and before.startswith(b"\0digest:"):
                if after is not None and b"\0digest:" + _digest(after) == before:
                    continue
                found.append(Changed(rel, None, None, why))
                continue
            if before == after:
                continue
            added, removed = _line_stat(before, after)
            found.append(Changed(rel, added, removed, why))
        return Evidence(tuple(found))


def restore(watch: TamperWatch, changed: Sequence[Changed]) -> list[str]:
    """Put `changed` files back as `watch` found them (content it kept); the paths it could not."""
    failed: list[str] = []
    for item in changed:
        before = watch._before.get(item.path)
        path = watch.cwd / item.path
        try:
            if before is None:
                path.unlink(missing_ok=True)
            elif before.startswith(b"\0digest:"):
                failed.append(item.path)
            else:
                path.write_bytes(before)
        except OSError:
            failed.append(item.path)
    return failed


def _digest(data: bytes) -> bytes:
    import hashlib

    return hashlib.sha256(data).hexdigest().encode()


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes() if path.is_file() else None
    except OSError:
        return None


def _line_stat(before: bytes | None, after: bytes | None) -> tuple[int | None, int | None]:
    try:
        old = (before or b"").decode("utf-8").splitlines()
        new = (after or b"").decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return None, None
    added = removed = 0
    for group in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        tag, i1, i2, j1, j2 = group
        if tag in ("replace", "delete"):
            removed += i2 - i1
        if tag in ("replace", "insert"):
            added += j2 - j1
    return added, removed


def _protected_files(root: Path, protected: Sequence[str]) -> list[str]:
    """The files of the protected paths themselves (a file, or a folder's files; bounded), so a
    large workspace whose listing is cut never drops one."""
    out: list[str] = []
    for rel in protected:
        path = root / rel
        if path.is_file():
            out.append(Path(rel).as_posix())
        elif path.is_dir():
            for folder, dirs, files in os.walk(path):
                dirs[:] = [d for d in dirs if d not in IGNORED_DIRS]
                out += [(Path(folder) / f).relative_to(root).as_posix() for f in files]
                if len(out) > MAX_FILES:
                    return out[:MAX_FILES]
    return out


def _matching_files(root: Path, patterns: Sequence[str]) -> list[str]:
    """Files matching `patterns` anywhere in the workspace, git-ignored ones too (a bounded walk
    that skips what `IGNORED_DIRS` names and virtualenvs, as test runners do)."""
    out: list[str] = []
    seen = 0
    matcher = _matcher(tuple(patterns))
    if matcher is None:
        return out
    base = str(root)
    for folder, dirs, files in os.walk(base):
        dirs[:] = sorted(
            d for d in dirs if d not in IGNORED_DIRS and not _is_virtualenv(os.path.join(folder, d))
        )
        prefix = "" if folder == base else os.path.relpath(folder, base).replace(os.sep, "/") + "/"
        out += [prefix + name for name in files if matcher.match(prefix + name)]
        seen += len(files)
        if seen > MAX_FILES * 5:
            break
    return out


def _workspace_files(root: Path) -> Iterable[str]:
    """Tracked and untracked (not ignored) files in a git work tree, else a bounded walk."""
    from kernel_bridge.safe_git import run_git  # no repository-configured program runs

    try:
        done: RunResult | None = run_git(root, "ls-files", "-co", "--exclude-standard", "-z", timeout=30)
    except OSError:
        done = None
    if done is not None and done.returncode == 0:
        names = [os.fsdecode(n) for n in done.stdout.split(b"\0") if n]
        return [n for n in names if not n.startswith(".continual-acp/")][:MAX_FILES]
    out: list[str] = []
    stack = [root]
    while stack and len(out) < MAX_FILES:
        current = stack.pop()
        try:
            entries = sorted(os.scandir(current), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in IGNORED_DIRS and not _is_virtualenv(entry.path):
                    stack.append(Path(entry.path))
            elif entry.is_file(follow_symlinks=False):
                out.append(Path(entry.path).relative_to(root).as_posix())
    return out
