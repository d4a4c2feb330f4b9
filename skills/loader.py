"""The kernel setup code: what a session runs in a fresh kernel to load the skills.

The kernel usually runs in the same environment as the server and imports `skills` directly. When it
runs another interpreter (a project's own venv), `skills` is not importable there, so the setup code
carries the skills' source and builds the modules from it -- the same way kernel_bridge ships its
host client. Stdlib only.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from skills.index_cache import SkillIndexCache
from skills.user_skills import SkillIndex, skill_roots

_HERE = Path(__file__).resolve().parent
# Module name -> file, in dependency order (a module's imports come before it). The safe reader
# of workspace files is harness_store's (stdlib only), shipped under its own name.
_MODULES = (
    ("harness_store.safe_read", "../harness_store/safe_read.py"),
    ("skills._safe_read", "_safe_read.py"),
    ("skills.user_skills", "user_skills.py"),
    ("skills._awaitable", "_awaitable.py"),
    ("skills", "__init__.py"),
    ("skills.refine", "refine.py"),
    ("skills.harness", "harness.py"),
    ("skills.editor", "editor.py"),
    ("skills.goal", "goal.py"),
    ("skills.mcp", "mcp.py"),
    ("skills.agents", "agents.py"),  # subagents
    ("skills._kernel", "_kernel.py"),
)


def _sources() -> dict[str, str]:
    return {name: (_HERE / file).read_text(encoding="utf-8") for name, file in _MODULES}


def setup_code(roots: Iterable[str | os.PathLike[str]]) -> str:
    """Python source that binds refine/harness/editor/goal/skills in the kernel's user namespace.

    `roots` are the user-skill roots to index (see `skill_roots`); passing them from the host keeps
    the kernel's `skills.list()` identical to the index in the system prompt.
    """
    root_list = [str(Path(r)) for r in roots]
    return f"""\
def _continual_acp_load_skills(roots, sources):
    import sys, types
    try:
        import skills._kernel as kernel_module
    except ImportError:
        # Another interpreter: build the skills package from the source the host sent.
        package = types.ModuleType("skills")
        package.__path__ = []
        sys.modules["skills"] = package
        for name, source in sources:
            parent_name = name.rpartition(".")[0]
            if parent_name and parent_name not in sys.modules:
                parent = types.ModuleType(parent_name)
                parent.__path__ = []
                sys.modules[parent_name] = parent
            module = package if name == "skills" else types.ModuleType(name)
            module.__file__ = "<continual-acp " + name + ">"
            sys.modules[name] = module
            exec(compile(source, module.__file__, "exec"), module.__dict__)
            if name != "skills":
                setattr(sys.modules[parent_name], name.rpartition(".")[2], module)
        kernel_module = sys.modules["skills._kernel"]
    kernel_module.install(get_ipython().user_ns, roots)


_continual_acp_load_skills({root_list!r}, {list(_sources().items())!r})
del _continual_acp_load_skills
"""


# The server's one cache: every session's prompts, `/skill:` listings and reads go through it.
SKILL_INDEXES = SkillIndexCache()


def session_skills(
    cwd: str | os.PathLike[str], env: Mapping[str, str] | None = None
) -> tuple[list[Path], SkillIndex]:
    """The roots for a session in `cwd` and the skills found there (host side: rebuilt only when
    the roots' skill folders changed by content; no Python paths, the kernel finds its own)."""
    roots = skill_roots(cwd, env)
    return roots, SKILL_INDEXES.index(roots)
