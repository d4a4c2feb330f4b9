"""A hostile `.continual-acp/skills/` folder, one shape at a time or all together (tests, benchmark).

Each shape is a skill folder whose `SKILL.md` is something a reader must not hang on or swallow: a
FIFO, a symlink to `/dev/zero`, a symlink loop, a symlink to `/proc/self/environ` (the reader's own
secrets), a 60 MB file; and a root holding 2,000 ordinary skills.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

SKILLS = Path(".continual-acp") / "skills"
MANY = 2000
BIG_BYTES = 60 * 1024 * 1024


def _folder(project: Path, name: str) -> Path:
    folder = project / SKILLS / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "SKILL.md"


def fifo(project: Path) -> list[tuple[Path, str]]:
    path = _folder(project, "fifo")
    os.mkfifo(path)
    return [(path, "a FIFO")]


def dev_zero(project: Path) -> list[tuple[Path, str]]:
    path = _folder(project, "dev-zero")  # sorts before the many skills: read under the cap
    path.symlink_to("/dev/zero")
    return [(path, "a device")]


def symlink_loop(project: Path) -> list[tuple[Path, str]]:
    path = _folder(project, "loop")
    path.symlink_to("SKILL.md")  # itself
    return [(path, "a symlink loop")]


def proc_environ(project: Path) -> list[tuple[Path, str]]:
    path = _folder(project, "environ")
    path.symlink_to("/proc/self/environ")
    return [(path, "a kernel pseudo-file")]


def huge(project: Path) -> list[tuple[Path, str]]:
    path = _folder(project, "huge")
    with path.open("wb") as fh:
        fh.write(b"---\nname: huge\ndescription: a skill with a 60 MB body\n---\n")
        fh.truncate(BIG_BYTES)
    return []  # usable: its frontmatter is read, its body only on demand (and refused past the cap)


def many(project: Path) -> list[tuple[Path, str]]:
    for i in range(MANY):
        path = _folder(project, f"skill-{i:04d}")
        path.write_text(f"---\nname: skill-{i:04d}\ndescription: ordinary skill {i}\n---\nbody\n")
    return [(project / SKILLS, "skill folders; only the first")]  # one line: past the per-root cap


SHAPES: dict[str, Callable[[Path], list[tuple[Path, str]]]] = {
    "fifo": fifo,
    "dev_zero": dev_zero,
    "symlink_loop": symlink_loop,
    "proc_environ": proc_environ,
    "huge": huge,
    "many": many,
}


def build(project: Path, shapes: list[str]) -> list[tuple[Path, str]]:
    """Lay the shapes in `project`; the paths a reader must skip (each warned about once) and words
    the warning's reason holds."""
    skipped: list[tuple[Path, str]] = []
    for shape in shapes:
        skipped += SHAPES[shape](project)
    return skipped
