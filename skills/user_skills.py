"""Agent Skills folders: find them, read their `SKILL.md` frontmatter, index them.

A skill is a folder holding `SKILL.md`, whose YAML frontmatter names it (`name`) and says when to use
it (`description`); the body is the full instructions, read on demand. A folder may also carry Python
(a package or modules) that the kernel can import. Stdlib only: this runs on the host (to list skills
in the system prompt and as `/skill:<name>` commands) and inside the kernel (`skills.list()`).

Roots are searched in order and the first skill with a given name wins, so a project's own skill
(`<cwd>/.continual-acp/skills`) shadows a user-wide one of the same name.

A skill folder is the repository's (or another tool's) data, so every read goes through
`harness_store.safe_read`: a `SKILL.md` that is a FIFO, a device, a symlink loop, a kernel
pseudo-file or over `ENTRY_MAX_BYTES` is a problem listed for that folder, never a hang. The host
scans the roots for every prompt (`scan`; `index_cache.py` rebuilds the index only when the scan's
fingerprint changed), so a scan reads at most `MAX_SKILLS_PER_ROOT` folders of a root (in name
order) and the first `FRONTMATTER_MAX_BYTES` of each `SKILL.md`: a root with thousands of skills
costs a bounded read per prompt, and the folders past the cap are one problem line.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness_store.safe_read import ENTRY_MAX_BYTES, Refused, read_prefix, read_text
else:  # the same module, loaded without harness_store/__init__ (skills/_safe_read.py)
    from skills._safe_read import safe_read

    _safe = safe_read()
    ENTRY_MAX_BYTES, Refused = _safe.ENTRY_MAX_BYTES, _safe.Refused
    read_prefix, read_text = _safe.read_prefix, _safe.read_text

SKILL_FILE = "SKILL.md"
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
DESCRIPTION_MAX = 1024
# Skill folders read per root and per index (see the module docstring).
MAX_SKILLS_PER_ROOT = 256
# The head of a SKILL.md that the index reads: the frontmatter must fit in it.
FRONTMATTER_MAX_BYTES = 16 * 1024
# Entries of one skill folder looked at for importable Python.
MAX_FOLDER_ENTRIES = 1000


@dataclass(frozen=True)
class SkillInfo:
    """One Agent Skill found on disk: name, description, where it lives."""

    name: str
    description: str
    folder: str
    root: str
    # Directories to put on the kernel's sys.path so the skill's Python is importable.
    python_paths: tuple[str, ...] = ()

    @property
    def skill_file(self) -> str:
        return str(Path(self.folder) / SKILL_FILE)

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "description": self.description, "path": self.skill_file}


@dataclass(frozen=True)
class SkillIndex:
    """The Agent Skills found, and the folders that could not be used."""

    skills: tuple[SkillInfo, ...] = ()
    # Folders that look like skills but could not be used, with the reason (for `doctor` and logs).
    problems: tuple[str, ...] = field(default_factory=tuple)

    def get(self, name: str) -> SkillInfo | None:
        for skill in self.skills:
            if skill.name == name:
                return skill
        return None

    @property
    def python_paths(self) -> list[str]:
        paths: list[str] = []
        for skill in self.skills:
            for path in skill.python_paths:
                if path not in paths:
                    paths.append(path)
        return paths


def skill_roots(cwd: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> list[Path]:
    """The four roots, project first: `<cwd>/.continual-acp/skills`, the user's config dir, Claude's, Codex's."""
    env = os.environ if env is None else env
    home = Path(env.get("HOME") or Path.home())
    config = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
    return [
        Path(cwd) / ".continual-acp" / "skills",
        config / "continual-acp" / "skills",
        home / ".claude" / "skills",
        home / ".codex" / "skills",
    ]


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        inner = value[1:-1]
        return inner.replace('\\"', '"') if value[0] == '"' else inner.replace("''", "'")
    return value


def parse_frontmatter(text: str) -> dict[str, str] | None:
    """Top-level `key: value` pairs of a `---` fenced YAML header (None when there is no header).

    Deliberately small: scalars, quoted scalars, and block scalars (`|`, `>`) or indented
    continuation lines -- what SKILL.md headers use. Nested mappings are kept as raw text.
    """
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return None
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() in ("---", "..."))
    except StopIteration:
        return None
    values: dict[str, str] = {}
    key: str | None = None
    block: str | None = None  # "|" keeps newlines, ">" folds them
    pieces: list[str] = []

    def flush() -> None:
        if key is not None:
            joined = "\n".join(pieces) if block == "|" else " ".join(p.strip() for p in pieces if p.strip())
            values[key] = _unquote(joined) if block is None else joined.strip()

    for raw in lines[1:end]:
        if raw and not raw[0].isspace() and ":" in raw and not raw.lstrip().startswith("#"):
            flush()
            name, _, rest = raw.partition(":")
            key, rest = name.strip(), rest.strip()
            block = rest[0] if rest[:1] in ("|", ">") else None
            pieces = [] if block else [rest]
        elif key is not None:
            pieces.append(raw.strip())
    flush()
    return values


def _python_paths(folder: Path) -> tuple[str, ...]:
    """Where imports of this skill's Python should resolve from."""
    paths: list[str] = []
    if (folder / "__init__.py").is_file() and folder.name.isidentifier():
        paths.append(str(folder.parent))  # the folder itself is the package
    try:
        children = [c for _, c in zip(range(MAX_FOLDER_ENTRIES), folder.iterdir(), strict=False)]
    except OSError:
        children = []
    if any(
        (c.is_file() and c.suffix == ".py" and c.name != "__init__.py")
        or (c.is_dir() and (c / "__init__.py").is_file())
        for c in children
    ):
        paths.append(str(folder))  # modules or packages inside the folder
    return tuple(paths)


def _read_head(path: Path) -> bytes | str:
    """The first `FRONTMATTER_MAX_BYTES` of a SKILL.md, or the reason it cannot be read."""
    try:
        # A linked SKILL.md is followed on purpose; what it reaches is checked on the descriptor.
        return read_prefix(path, FRONTMATTER_MAX_BYTES, follow=True)
    except Refused as exc:
        return f"{path}: {exc.strerror}"
    except OSError as exc:
        return f"{path}: cannot read ({exc})"


def _skill_from_head(folder: Path, root: Path, head: bytes | str, *, python: bool) -> SkillInfo | str:
    path = folder / SKILL_FILE
    if isinstance(head, str):
        return head
    text = head.decode("utf-8", errors="replace")
    meta = parse_frontmatter(text)
    if meta is None:
        return f"{path}: no frontmatter (expected a '---' header with name and description)"
    name = meta.get("name", "").strip()
    description = meta.get("description", "").strip()
    if not name:
        return f"{path}: frontmatter has no name"
    if not _NAME.match(name):
        return f"{path}: name {name!r} must be lowercase letters, digits and hyphens (at most 64)"
    if not description:
        return f"{path}: frontmatter has no description"
    return SkillInfo(
        name=name,
        description=description[:DESCRIPTION_MAX],
        folder=str(folder),
        root=str(root),
        python_paths=_python_paths(folder) if python else (),
    )


def read_skill_folder(folder: Path, root: Path) -> SkillInfo | str:
    """The skill in `folder`, or a reason it cannot be used."""
    return _skill_from_head(folder, root, _read_head(folder / SKILL_FILE), python=True)


@dataclass(frozen=True)
class SkillFolder:
    """One skill folder as a scan found it: where, and its SKILL.md's head (or why it is unreadable)."""

    root: Path
    folder: Path
    head: bytes | str


@dataclass(frozen=True)
class SkillScan:
    """Everything an index is built from, read once: per root in order, its skill folders (with the
    head of each SKILL.md) and the problems of listing it. `build` is a function of this alone, so
    two scans with one fingerprint build the same index (without Python paths, which walk folders)."""

    items: tuple[SkillFolder | str, ...] = ()

    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for item in self.items:
            if isinstance(item, str):
                parts = [b"problem", item.encode("utf-8", "surrogateescape")]
            else:
                head = item.head
                body = (
                    head
                    if isinstance(head, bytes)
                    else b"unreadable:" + head.encode("utf-8", "surrogateescape")
                )
                parts = [b"folder", os.fsencode(item.root), os.fsencode(item.folder), body]
            for part in parts:
                digest.update(len(part).to_bytes(8, "big") + part)  # length-prefixed: no ambiguity
        return digest.hexdigest()


def scan(roots: Iterable[str | os.PathLike[str]]) -> SkillScan:
    """Each root's skill folders (one level deep, at most `MAX_SKILLS_PER_ROOT` by name) and the
    head of each one's SKILL.md, read through the safe reader."""
    items: list[SkillFolder | str] = []
    for root_like in roots:
        root = Path(root_like).expanduser()
        if not root.is_dir():
            continue
        try:
            # Names first (no stat each): only the folders read below are looked at.
            with os.scandir(root) as listing:
                entries = sorted((e for e in listing if e.is_dir()), key=lambda e: e.name)
        except OSError as exc:
            items.append(f"{root}: cannot list ({exc})")
            continue
        folders: list[Path] = []
        for position, entry in enumerate(entries):
            # lexists, not is_file: a SKILL.md that is not a regular file is reported, not skipped
            # in silence (is_file would stat through a FIFO or a device and say no without a word).
            if not os.path.lexists(os.path.join(entry.path, SKILL_FILE)):
                continue
            if len(folders) == MAX_SKILLS_PER_ROOT:
                items.append(
                    f"{root}: more than {MAX_SKILLS_PER_ROOT} skill folders; only the first "
                    f"{MAX_SKILLS_PER_ROOT} (by name) are read ({len(entries) - position} folders after them)"
                )
                break
            folders.append(Path(entry.path))
        items.extend(SkillFolder(root, folder, _read_head(folder / SKILL_FILE)) for folder in folders)
    return SkillScan(tuple(items))


def build(scanned: SkillScan, *, python: bool = True) -> SkillIndex:
    """The index of a scan: first name wins, problems listed; `python` also finds each skill's
    importable Python (a walk of its folder: what the kernel needs, not the prompt)."""
    found: list[SkillInfo] = []
    problems: list[str] = []
    seen: set[str] = set()
    for item in scanned.items:
        if isinstance(item, str):
            problems.append(item)
            continue
        info = _skill_from_head(item.folder, item.root, item.head, python=python)
        if isinstance(info, str):
            problems.append(info)
        elif info.name in seen:
            problems.append(f"{info.skill_file}: skill {info.name!r} is shadowed by an earlier root")
        else:
            seen.add(info.name)
            found.append(info)
    return SkillIndex(tuple(found), tuple(problems))


def discover(roots: Iterable[str | os.PathLike[str]]) -> SkillIndex:
    """Every usable skill under `roots` (one level deep), first name wins; problems listed."""
    return build(scan(roots))


def read_skill_text(index: SkillIndex, name: str) -> str:
    """The full SKILL.md of `name`; KeyError naming the known skills when there is none."""
    skill = index.get(name)
    if skill is None:
        known = ", ".join(s.name for s in index.skills) or "none"
        raise KeyError(f"no skill named {name!r} (known: {known})")
    return read_text(skill.skill_file, limit=ENTRY_MAX_BYTES, follow=True)


def render_index(skills: Sequence[SkillInfo], *, max_chars: int = 4_000) -> str:
    """The system-prompt section: one line per skill (name + description), bounded."""
    if not skills:
        return ""
    lines = [
        "# Skills",
        'Read a skill\'s full instructions before using it: `print(skills.read("<name>"))` in a cell.',
    ]
    used = sum(len(line) + 1 for line in lines)
    shown = 0
    for skill in skills:
        description = " ".join(skill.description.split())
        if len(description) > 200:
            description = description[:197] + "..."
        line = f"- {skill.name}: {description}"
        if used + len(line) + 1 > max_chars:
            break
        lines.append(line)
        used += len(line) + 1
        shown += 1
    if shown < len(skills):
        lines.append(f"(+{len(skills) - shown} more skills; `skills.list()` lists them all)")
    return "\n".join(lines)
