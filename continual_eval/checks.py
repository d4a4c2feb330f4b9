"""Trace rules of a checker: how the result was reached, read from the cells the session ran.

A checker's outcome command (task.py) says whether the repository ends up right; these rules say
whether it got there the way the task measures. They read the session's cells (`cells_from_frames`:
the `tool_call` updates of kind `execute` in `frames.jsonl`, each with its code and whether it
failed) and never run anything: a cell is data here.

* `must_run`: regexes; each must match a command of a cell that did not fail (the command that had
  to run: `./build`, the project's test runner, the generator);
* `must_not_run`: regexes no command of any cell may match (`git commit` where a wrapper is the rule);
* `must_not_write`: globs of paths no cell may write by hand (a redirect, `touch`, `tee`, `cp`,
  `sed -i`, or a Python statement naming the path, or a variable holding it, and writing), unless
  the writing command is the path's producer (`produced_by`: glob -> regex, e.g. `selftest.txt`
  from `python3 -m app.selftest >`);
* `unchanged`: paths whose content must equal the freshly built task's (existing code and tests that
  the change must not delete or weaken).

Commands are found in `%%bash` / `%%sh` cells (line by line, split at `;`, `&&`, `||`, `|`, comments
dropped), in `!cmd` lines of Python cells, and in string arguments of `subprocess.*` / `os.system`
calls. What a cell hides behind `eval`, base64 or variables is not seen: the rules catch the known
shortcuts, and the trace stays in the results for anyone to read.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from continual_eval.jsonl import read_jsonl

SHELL_MAGICS = ("%%bash", "%%sh", "%%script bash", "%%script sh")
# Commands that write the paths they are given (a hand edit, when the path is one that must not be).
WRITERS = frozenset(
    {"touch", "tee", "cp", "mv", "rm", "truncate", "dd", "install", "ln", "chmod", "patch", "ed"}
)
PY_WRITE = re.compile(
    r"""open\([^)]*,\s*(mode\s*=\s*)?['"][rwax+bt]*[wax+][rwax+bt]*['"]"""
    r"""|write_text|write_bytes|\.touch\(|\.unlink\(|\.rename\(|\.replace\(|os\.(remove|unlink|rename|replace)"""
    r"""|shutil\.(copy|copyfile|copy2|move|rmtree)|writelines|\.write\("""
)
PY_RUNNERS = {
    ("subprocess", "run"),
    ("subprocess", "call"),
    ("subprocess", "check_call"),
    ("subprocess", "check_output"),
    ("subprocess", "Popen"),
    ("subprocess", "getoutput"),
    ("subprocess", "getstatusoutput"),
    ("os", "system"),
    ("os", "popen"),
}
ENV_ASSIGNMENT = re.compile(r"^(\w+=\S*\s+)+")
# Wrappers that run the command after them: `env X=1 ./build`, `timeout 60 ./build`, `time ./build`.
WRAPPERS = re.compile(
    r"^((env|time|nice|nohup|command|exec|stdbuf(\s+-\S+)*|timeout(\s+-\S+)*\s+\S+)\s+|\w+=\S*\s+)+"
)
MAX_CELL_CHARS = 200_000  # a cell longer than this is read in part (rules see its head)


@dataclass(frozen=True)
class Cell:
    """One cell the session ran: its code, and whether it ended `failed`."""

    code: str
    failed: bool = False


@dataclass(frozen=True)
class Command:
    """A shell command found in a cell: the segment's text, whether its cell failed, and the cell's index."""

    text: str
    cell: int
    failed: bool


@dataclass(frozen=True)
class TraceRules:
    must_run: tuple[str, ...] = ()
    must_not_run: tuple[str, ...] = ()
    must_not_write: tuple[str, ...] = ()
    produced_by: Mapping[str, str] = field(default_factory=dict)
    unchanged: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.must_run or self.must_not_run or self.must_not_write or self.unchanged)


def cells_from_frames(path: Path) -> list[Cell]:
    """The cells of a session, in order, from its `frames.jsonl` (missing file: no cells)."""
    order: list[str] = []
    code: dict[str, str] = {}
    failed: set[str] = set()
    for frame in read_jsonl(path):
        msg = frame.get("msg") or {}
        if frame.get("dir") != "in" or not isinstance(msg, dict) or msg.get("method") != "session/update":
            continue
        update = (msg.get("params") or {}).get("update") or {}
        if not isinstance(update, dict):
            continue
        call = str(update.get("toolCallId") or "")
        kind = update.get("sessionUpdate")
        raw = update.get("rawInput")
        if kind == "tool_call" and update.get("kind") == "execute" and isinstance(raw, dict):
            source = raw.get("code")
            if isinstance(source, str) and call not in code:
                order.append(call)
                code[call] = source[:MAX_CELL_CHARS]
        if kind in ("tool_call", "tool_call_update") and update.get("status") == "failed":
            failed.add(call)
    return [Cell(code[c], c in failed) for c in order]


def _shell_body(code: str) -> str | None:
    first, _, rest = code.partition("\n")
    return rest if first.strip() in SHELL_MAGICS else None


def _split_shell(text: str) -> list[str]:
    """Command segments of shell text: lines (continuations joined), comments dropped, split at
    `;`, `&&`, `||`, `|` outside quotes."""
    segments: list[str] = []
    for line in text.replace("\\\n", " ").splitlines():
        current: list[str] = []
        quote = ""
        i = 0
        while i < len(line):
            ch = line[i]
            if quote:
                current.append(ch)
                if ch == quote:
                    quote = ""
            elif ch in "'\"":
                quote = ch
                current.append(ch)
            elif ch == "#" and (i == 0 or line[i - 1].isspace()):
                break
            elif ch in ";|&":
                # `&&`, `||`, `;`, `|` and a lone `&` end a segment; `>&` / `&>` are redirections.
                if ch == "&" and ((current and current[-1] == ">") or line[i + 1 : i + 2] == ">"):
                    current.append(ch)
                else:
                    segments.append("".join(current))
                    current = []
                    if line[i + 1 : i + 2] == ch:
                        i += 1
            else:
                current.append(ch)
            i += 1
        segments.append("".join(current))
    return [s.strip().lstrip("({").strip() for s in segments if s.strip().strip("(){}")]


def _python_tree(code: str) -> ast.Module | None:
    # IPython lines (`!cmd`, `%magic`) are not Python: blank them, keeping the indentation.
    lines = [
        (line[: len(line) - len(line.lstrip())] + "pass") if line.lstrip().startswith(("!", "%")) else line
        for line in code.splitlines()
    ]
    try:
        return ast.parse("\n".join(lines))
    except (SyntaxError, ValueError):
        return None


def _python_commands(code: str) -> list[str]:
    commands = [line.lstrip()[1:] for line in code.splitlines() if line.lstrip().startswith("!")]
    tree = _python_tree(code)
    if tree is None:
        return commands
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = (
            (func.value.id, func.attr)
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
            else ("", func.attr)
            if isinstance(func, ast.Attribute)
            else ("", "")
        )
        if name not in PY_RUNNERS and name[1] != "system":
            continue
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            commands.append(arg.value)
        elif isinstance(arg, (ast.List, ast.Tuple)):
            words = [str(e.value) if isinstance(e, ast.Constant) else "?" for e in arg.elts]
            commands.append(" ".join(shlex.quote(w) if w != "?" else w for w in words))
    return commands


def commands(cells: Sequence[Cell]) -> list[Command]:
    """Every shell command the cells ran, as segments, in order."""
    found: list[Command] = []
    for index, cell in enumerate(cells):
        body = _shell_body(cell.code)
        texts = [body] if body is not None else _python_commands(cell.code)
        for text in texts:
            found += [Command(s, index, cell.failed) for s in _split_shell(text)]
    return found


def _matches(pattern: str, command: str) -> bool:
    """`pattern` searched in the command, and in the command with its leading `VAR=value`s and
    wrappers (`env`, `timeout 60`, `time`, ...) removed."""
    return bool(re.search(pattern, command) or re.search(pattern, WRAPPERS.sub("", command)))


def _words(segment: str) -> list[str]:
    try:
        return shlex.split(segment)
    except ValueError:
        return segment.split()


def _path_matches(word: str, glob: str) -> bool:
    word = word.strip("'\"")
    while word.startswith("./"):
        word = word[2:]
    return fnmatch.fnmatchcase(word, glob) or fnmatch.fnmatchcase(word, f"*/{glob}")


def _shell_writes(segment: str, glob: str) -> bool:
    words = _words(ENV_ASSIGNMENT.sub("", segment))
    for i, word in enumerate(words):
        if word in (">", ">>", "&>", ">|") and i + 1 < len(words) and _path_matches(words[i + 1], glob):
            return True
        head = re.match(r"^(\d?>>?|&>)(.+)$", word)
        if head and _path_matches(head.group(2), glob):
            return True
    if not words:
        return False
    program = Path(words[0]).name
    named = any(_path_matches(w, glob) for w in words[1:])
    if program == "sed":
        return named and any(w.startswith("-i") for w in words[1:])
    return named and program in WRITERS


def _names_path(node: ast.AST, glob: str, tainted: set[str]) -> bool:
    """`node` holds a string naming a path that matches `glob`, or a variable that holds one."""
    for child in ast.walk(node):
        if isinstance(child, ast.Constant) and isinstance(child.value, str):
            if any(_path_matches(w, glob) for w in (child.value, *child.value.split())):
                return True
        elif isinstance(child, ast.Name) and child.id in tainted:
            return True
    return False


def _targets(node: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]


def _python_writes(code: str, glob: str) -> bool:
    """A Python cell writes a path matching `glob`: one statement both names the path (or a variable
    holding it) and writes (`open(.., "w")`, `write_text`, `shutil.copy`, `os.remove`, ...)."""
    tree = _python_tree(code)
    if tree is None:  # not Python after all: any mention next to any write counts
        names = re.findall(r"""['"]([^'"\n]+)['"]""", code)
        return bool(PY_WRITE.search(code)) and any(_path_matches(n, glob) for n in names)
    blanked = "\n".join(
        (line[: len(line) - len(line.lstrip())] + "pass") if line.lstrip().startswith(("!", "%")) else line
        for line in code.splitlines()
    )
    # Variables that hold the path (`p = Path("dist/app.txt")`, `for name in (...)`), to a fixpoint.
    tainted: set[str] = set()
    for _ in range(4):
        before = len(tainted)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and _names_path(node.value, glob, tainted):
                for target in node.targets:
                    tainted.update(_targets(target))
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                if _names_path(node.value, glob, tainted):
                    tainted.update(_targets(node.target))
            elif isinstance(node, (ast.For, ast.comprehension)) and _names_path(node.iter, glob, tainted):
                tainted.update(_targets(node.target))
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                if _names_path(node.context_expr, glob, tainted):
                    tainted.update(_targets(node.optional_vars))
        if len(tainted) == before:
            break
    compound = (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.FunctionDef, ast.ClassDef)
    for node in ast.walk(tree):
        parts: list[ast.AST] = []
        if isinstance(node, ast.With):
            parts = list(node.items)
        elif isinstance(node, ast.stmt) and not isinstance(node, compound):
            parts = [node]
        for part in parts:
            text = ast.get_source_segment(blanked, part) or ""
            if PY_WRITE.search(text) and _names_path(part, glob, tainted):
                return True
    return False


def hand_writes(cells: Sequence[Cell], glob: str, producer: str | None = None) -> list[int]:
    """Indices of cells that write a path matching `glob` by hand (not through `producer`)."""
    found: list[int] = []
    for index, cell in enumerate(cells):
        body = _shell_body(cell.code)
        segments = _split_shell(body) if body is not None else []
        if body is None:
            ran = _python_commands(cell.code)
            segments = [s for text in ran for s in _split_shell(text)]
            by_producer = producer is not None and any(_matches(producer, s) for s in segments)
            if not by_producer and _python_writes(cell.code, glob):
                found.append(index)
                continue
        if any(
            _shell_writes(s, glob) and not (producer is not None and _matches(producer, s)) for s in segments
        ):
            found.append(index)
    return found


def _same_file(a: Path, b: Path) -> bool:
    if a.is_symlink() or b.is_symlink():
        return a.is_symlink() and b.is_symlink() and str(a.readlink()) == str(b.readlink())
    if not (a.is_file() and b.is_file()):
        return a.exists() == b.exists() and not a.is_file() and not b.is_file()
    return a.stat().st_size == b.stat().st_size and a.read_bytes() == b.read_bytes()


def judge(
    rules: TraceRules, cells: Sequence[Cell] | None, repo: Path, original: Path | None = None
) -> list[str]:
    """What is wrong with how the session reached its result (empty: nothing)."""
    problems: list[str] = []
    if rules.must_run or rules.must_not_run or rules.must_not_write:
        if cells is None:
            return ["no trace of the session's cells was given to the checker"]
        found = commands(cells)
        for pattern in rules.must_run:
            if not any(_matches(pattern, c.text) for c in found if not c.failed):
                problems.append(f"no cell that succeeded ran a command matching /{pattern}/")
        for pattern in rules.must_not_run:
            hits = [c for c in found if _matches(pattern, c.text)]
            if hits:
                problems.append(f"cell {hits[0].cell + 1} ran `{hits[0].text}` (not allowed: /{pattern}/)")
        for glob in rules.must_not_write:
            hits_at = hand_writes(cells, glob, rules.produced_by.get(glob))
            if hits_at:
                problems.append(f"cell {hits_at[0] + 1} wrote {glob} by hand")
    if rules.unchanged and original is not None:
        for name in rules.unchanged:
            if not _same_file(repo / name, original / name):
                problems.append(f"{name} differs from the task's original (existing code or tests changed)")
    return problems


def rules_from(table: Mapping[str, Any], where: str) -> TraceRules:
    """The `[checker.trace]` table of a task.toml; raises ValueError naming the key."""

    def strings(key: str) -> tuple[str, ...]:
        value = table.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{where}: {key} must be a string or a list of strings; got {value!r}")
        return tuple(value)

    produced = table.get("produced_by", {})
    if not isinstance(produced, dict) or not all(isinstance(v, str) for v in produced.values()):
        raise ValueError(f"{where}: produced_by must be a table of glob = regex; got {produced!r}")
    unknown = set(table) - {"must_run", "must_not_run", "must_not_write", "produced_by", "unchanged"}
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    rules = TraceRules(
        must_run=strings("must_run"),
        must_not_run=strings("must_not_run"),
        must_not_write=strings("must_not_write"),
        produced_by=dict(produced),
        unchanged=strings("unchanged"),
    )
    for pattern in (*rules.must_run, *rules.must_not_run, *rules.produced_by.values()):
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"{where}: /{pattern}/ is not a valid regex: {exc}") from None
    return rules


def problems_text(problems: Iterable[str]) -> str:
    return "\n".join(f"[trace] {p}" for p in problems)
