"""Gates run what was pinned: each gate's programs, interpreter and runner module, by path and content.

A gate command is pinned as text when the loop starts, but text is not what runs: `python3 -m pytest`
means whatever `python3` is on the gate's PATH, whatever `pytest` that interpreter imports, and any
`sitecustomize`/`usercustomize`/`*.pth` its start-up runs. A cell can change each of them (a shim on
PATH, a `pytest.py`, a `.pth` in a writable site-packages). So when the loop starts every gate is
resolved to files, absolute and real, with a content digest (`pin_gate`); before each run it is
resolved again and compared (`GatePin.differences`): a different resolution or a changed digest is a
shadowing file, reported by path, and the pass is not accepted without asking.

What is resolved, for each simple command of the gate (`a && b; c | d`): its first word on the PATH
the gate gets (`gate_environment`). When that is a Python interpreter (by name, or the `#!` line of
a console script such as `pytest`), a probe runs it with the gate's environment and working folder
(so it sees what the gate's interpreter will see) and reports the interpreter's executable, the
origin of the module the gate runs (`-m X`, or the console script's name) and the Python files of
the distribution that provides it outside the workspace (all of `_pytest/` for `pytest`, with the
bytecode cached for them), `sitecustomize`, `usercustomize` and its site folders; the server itself
then lists and digests the start-up files of those folders (`*.pth`, `sitecustomize.py`,
`usercustomize.py`), also the folders pinned at the start, so a probe whose output a start-up file
forged still shows the file. (The workspace's own files are the tamper watch's: project code is
expected to change.)

Everything here blocks (processes, file reads): call it in a worker thread. Files are read as data:
regular files only, opened non-blocking, digested in chunks.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent_core.autonomy.gate_command import module_argument, program_and_args, simple_commands
from agent_core.autonomy.pinned_files import file_digest, read_head

log = logging.getLogger(__name__)

__all__ = [
    "PROBE_TIMEOUT",
    "WORKSPACE_PYTHON_VARIABLES",
    "GatePin",
    "PinnedFile",
    "gate_environment",
    "gate_modules",
    "pin_gate",
    "program_words",
]

PROBE_TIMEOUT = 30.0
MAX_PROBE_OUTPUT = 64 << 10  # the probe's output kept (its answer is the last line)
MAX_SITE_ENTRIES = 2_000  # entries listed per site folder (a huge folder is cut, the cut is pinned)
# Python variables that would let the environment add code to the gate's interpreter; the gate never
# gets them from the server's environment (a gate command that wants one says so itself).
WORKSPACE_PYTHON_VARIABLES = (
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "PYTHONHOME",
    "PYTHONEXECUTABLE",
    "PYTHONPLATLIBDIR",
    "PYTHONINSPECT",
    "PYTHONSAFEPATH",
)
_PYTHON_NAME = re.compile(r"python(\d+(\.\d+)*)?[a-z]?(\.exe)?$")
_STARTUP_NAMES = ("sitecustomize.py", "usercustomize.py")
_STARTUP_WHAT = "start-up file "
_RUNNER_WHAT = "runner file "  # a Python file of the distribution that provides the gate's module
_PLUGIN_WHAT = "entry points "  # an installed distribution's plugins (pytest11 and the like)
_CACHE_WHAT = "runner bytecode "  # its cached bytecode (Python loads it instead of the source)
MAX_RUNNER_FILES = 5_000
_MARK = "continual-acp-gate-probe:"
# Runs in the gate's interpreter, with the gate's environment: where its module and start-up code
# come from. `find_spec` of a top-level name imports nothing.
_PROBE = (
    "import importlib.util as u, json, site, sys\n"
    "def origin(name):\n"
    "    try:\n"
    "        spec = u.find_spec(name) if name else None\n"
    "    except Exception:\n"
    "        return None\n"
    "    return None if spec is None else spec.origin\n"
    "def dist_files(name):\n"
    "    top = name.split('.')[0]\n"
    "    if not top:\n"
    "        return []\n"
    "    try:\n"
    "        import importlib.metadata as md\n"
    "        def py(dist):\n"
    "            return [str(f.locate()) for f in md.distribution(dist).files or [] if str(f).endswith('.py')]\n"
    "        try:\n"  # the distribution named like the module (pytest): one lookup
    "            found = py(top)\n"
    "            if origin(top) in found:\n"
    "                return found\n"
    "        except md.PackageNotFoundError:\n"
    "            pass\n"
    "        out = []\n"  # else every distribution's top-level names (slower)
    "        for dist in md.packages_distributions().get(top, [])[:3]:\n"
    "            out += py(dist)\n"
    "        return out\n"
    "    except Exception:\n"
    "        return []\n"
    "dirs = list(site.getsitepackages()) if hasattr(site, 'getsitepackages') else []\n"
    "dirs.append(site.getusersitepackages())\n"
    "print(" + repr(_MARK) + " + json.dumps({'executable': sys.executable, 'module': origin(sys.argv[1]),\n"
    "      'sitecustomize': origin('sitecustomize'), 'usercustomize': origin('usercustomize'),\n"
    "      'site': dirs, 'dist': dist_files(sys.argv[1]), 'tag': sys.implementation.cache_tag}))\n"
)


@dataclass(frozen=True)
class PinnedFile:
    """One thing a gate runs: `what` says which (stable across resolutions, the compare key),
    `path` the real absolute file (None: not found), `digest` its content (None: not a readable
    regular file)."""

    what: str
    path: str | None
    digest: str | None


@dataclass(frozen=True)
class GatePin:
    command: str
    files: tuple[PinnedFile, ...] = ()
    site_dirs: tuple[str, ...] = field(default=())  # folders whose start-up files are pinned

    def differences(self, now: GatePin, cwd: str | os.PathLike[str] | None = None) -> list[tuple[str, str]]:
        """What resolves differently in `now`: (path, why) pairs, the path the one to name."""
        before = {f.what: f for f in self.files}
        after = {f.what: f for f in now.files}
        found: list[tuple[str, str]] = []
        for key in sorted(set(before) | set(after)):
            old, new = before.get(key), after.get(key)
            if old == new:
                continue
            if old is None and key.startswith(_CACHE_WHAT):
                continue  # bytecode written since the pin: Python compiled the pinned source
            what = key  # the files of a folder or a distribution: their path is said anyway
            for prefix in (_STARTUP_WHAT, _RUNNER_WHAT, _CACHE_WHAT, _PLUGIN_WHAT):
                if key.startswith(prefix):
                    what = prefix.strip()
            if new is None or new.path is None:
                assert old is not None
                found.append((_shown(old.path or key, cwd), f"{what}: gone"))
            elif old is None or old.path is None:
                found.append((_shown(new.path, cwd), f"{what}: appeared"))
            elif old.path != new.path:
                found.append((_shown(new.path, cwd), f"{what}: now {new.path} (was {old.path})"))
            else:
                found.append((_shown(new.path, cwd), f"{what}: content changed"))
        return found


def _shown(path: str, cwd: str | os.PathLike[str] | None) -> str:
    if cwd is None:
        return path
    try:
        return Path(path).relative_to(os.path.realpath(cwd)).as_posix()
    except ValueError:
        return path


# ---------------------------------------------------------------- the environment


def gate_environment(base: Mapping[str, str], cwd: str | os.PathLike[str], command: str) -> dict[str, str]:
    """The environment a gate runs with, which the workspace cannot extend.

    From `base` (the server's, already without secrets): no Python variables that add code
    (`WORKSPACE_PYTHON_VARIABLES`); PATH without empty, relative or in-workspace folders (a file a
    cell drops there would shadow a program), except a virtualenv's `bin` the command names itself
    (`.venv/bin/python -m pytest`), which goes first (with `VIRTUAL_ENV`), as activating it would;
    and `PYTHONSAFEPATH=1` (Python 3.11+: `-m` and `-c` do not put the working folder on sys.path,
    so a `pytest.py` there is not `python -m pytest`)."""
    root = os.path.realpath(cwd)
    env = {k: v for k, v in base.items() if k not in WORKSPACE_PYTHON_VARIABLES}
    kept = [p for p in env.get("PATH", "").split(os.pathsep) if _outside(p, root)]
    named = _named_venv_bins(cwd, command)
    env["PATH"] = os.pathsep.join(dict.fromkeys([*named, *kept]))
    if named:
        env["VIRTUAL_ENV"] = str(Path(named[0]).parent)
    else:
        env.pop("VIRTUAL_ENV", None)
    env["PYTHONSAFEPATH"] = "1"
    return env


def _outside(entry: str, root: str) -> bool:
    if not entry or not os.path.isabs(entry):
        return False
    real = os.path.realpath(entry)
    return real != root and not real.startswith(root.rstrip(os.sep) + os.sep)


def _named_venv_bins(cwd: str | os.PathLike[str], command: str) -> list[str]:
    """Virtualenv `bin` folders of the programs the command names by path."""
    out: list[str] = []
    for word in program_words(command):
        if "/" not in word:
            continue
        folder = os.path.dirname(os.path.join(cwd, os.path.expanduser(word)))
        if os.path.isfile(os.path.join(os.path.dirname(folder), "pyvenv.cfg")):
            out.append(os.path.abspath(folder))
    return out


# ---------------------------------------------------------------- parsing the command


def program_words(command: str) -> list[str]:
    """The first word of each simple command of a shell command (assignments and `exec`/`env`
    skipped): the programs the shell looks up."""
    out = []
    for words in simple_commands(command):
        found = program_and_args(words)
        if found is not None:
            out.append(found[0])
    return out


def gate_modules(command: str) -> list[str]:
    """Top-level names of the modules a gate runs as `python -m X`: a workspace file named like
    one (`X.py`, `X/`) could stand in for it where the working folder is on `sys.path`."""
    names: list[str] = []
    for words in simple_commands(command):
        found = program_and_args(words)
        if found is None:
            continue
        program, args = found
        if _PYTHON_NAME.match(os.path.basename(program)):
            module = module_argument(args)
            if module:
                names.append(module.split(".")[0])
    return list(dict.fromkeys(names))


# ---------------------------------------------------------------- resolving


def pin_gate(
    command: str, cwd: str | os.PathLike[str], env: Mapping[str, str], *, site_dirs: Iterable[str] = ()
) -> GatePin:
    """Resolve `command` as the shell will run it with `env` in `cwd` (blocking).

    `site_dirs`: folders pinned before (their start-up files are listed again even when the probe
    no longer reports them)."""
    files: list[PinnedFile] = []
    sites: list[str] = list(site_dirs)
    for position, words in enumerate(simple_commands(command)):
        found = program_and_args(words)
        if found is None:
            continue
        program, args = found
        label = f"program `{program}`" + (f" (command {position + 1})" if position else "")
        path = _which(program, cwd, env)
        files.append(PinnedFile(label, path and os.path.realpath(path), file_digest(path)))
        if path is None:
            continue
        interpreter, module = _python_of(program, path, args)
        if interpreter is None:
            continue
        probe = _probe(interpreter, module, cwd, env)
        where = f" of `{program}`" + (f" (command {position + 1})" if position else "")
        if probe is None:
            files.append(PinnedFile(f"interpreter{where}", None, None))
            continue
        executable = str(probe.get("executable") or "")
        files.append(_file(f"interpreter{where}", executable))
        if module:
            origin = _string(probe.get("module"))
            files.append(_file(f"module `{module}`{where}", origin))
            if origin is not None and os.path.basename(origin) == "__init__.py":
                files.append(
                    _file(
                        f"module `{module}.__main__`{where}",
                        os.path.join(os.path.dirname(origin), "__main__.py"),
                    )
                )
        for name in ("sitecustomize", "usercustomize"):
            files.append(_file(f"{name}{where}", _string(probe.get(name))))
        venv_config = Path(executable).parent.parent / "pyvenv.cfg"
        if executable and venv_config.is_file():
            files.append(_file(f"virtualenv config{where}", str(venv_config)))
        reported = probe.get("site")
        if isinstance(reported, list):
            sites += [s for s in reported if isinstance(s, str) and os.path.isabs(s)]
        installed = [os.path.realpath(s) for s in sites]
        files += _runner_files(probe.get("dist"), probe.get("tag"), os.path.realpath(cwd), installed)
    sites = list(dict.fromkeys(os.path.realpath(s) for s in sites))
    for folder in sites:
        files += _startup_files(folder)
    return GatePin(command, tuple(_dedupe(files)), tuple(sites))


def _dedupe(files: Iterable[PinnedFile]) -> list[PinnedFile]:
    seen: dict[str, PinnedFile] = {}
    for item in files:
        seen.setdefault(item.what, item)
    return list(seen.values())


def _string(value: object) -> str | None:
    return value if isinstance(value, str) and os.path.isabs(value) else None


def _file(what: str, path: str | None) -> PinnedFile:
    if not path:
        return PinnedFile(what, None, None)
    real = os.path.realpath(path)
    return PinnedFile(what, real, file_digest(real))


def _which(program: str, cwd: str | os.PathLike[str], env: Mapping[str, str]) -> str | None:
    if "/" in program:
        path = os.path.join(cwd, os.path.expanduser(program))
        return os.path.abspath(path) if os.path.isfile(path) and os.access(path, os.X_OK) else None
    found = shutil.which(program, path=env.get("PATH", ""))
    return os.path.abspath(found) if found else None


def _python_of(program: str, path: str, args: Sequence[str]) -> tuple[str | None, str | None]:
    """(interpreter, module) when `path` runs Python: a python by name (module from `-m`), or a
    script whose `#!` line names one (the module: the script's name, as console scripts are)."""
    if _PYTHON_NAME.match(os.path.basename(program)) or _PYTHON_NAME.match(
        os.path.basename(os.path.realpath(path))
    ):
        return path, module_argument(args)
    line = _first_line(path)
    if not line.startswith("#!"):
        return None, None
    words = line[2:].split()
    if not words:
        return None, None
    interpreter = words[0]
    if os.path.basename(interpreter) == "env" and len(words) > 1:
        interpreter = words[1]
    if not _PYTHON_NAME.match(os.path.basename(interpreter)):
        return None, None
    name = os.path.basename(program)
    module = name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else None
    return interpreter, module


def _first_line(path: str) -> str:
    data = read_head(path, 256)
    return data.split(b"\n", 1)[0].decode("utf-8", "replace").strip()


def _probe(
    interpreter: str, module: str | None, cwd: str | os.PathLike[str], env: Mapping[str, str]
) -> dict[str, object] | None:
    if "/" not in interpreter:
        found = shutil.which(interpreter, path=env.get("PATH", ""))
        if found is None:
            return None
        interpreter = found
    from host_base.process_groups import kill_and_reap
    from kernel_bridge import workspace_launch

    kept = bytearray()
    try:
        # Through the launch seam like the gate itself: the interpreter's start-up files (`.pth`,
        # `sitecustomize`) are workspace-controlled code, run with no capabilities, the server's
        # secrets scrubbed, and the backend's confinement (whose private dir lives as long as this
        # block, so the probe ends inside it).
        with workspace_launch.policy(cwd, env) as launch:
            proc = subprocess.Popen(
                workspace_launch.launch_argv([interpreter, "-c", _PROBE, module or ""], launch),
                cwd=launch.cwd,
                env=dict(launch.env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # its own group: whatever start-up code it ran goes with it
                close_fds=True,
            )

            def drain() -> None:  # the tail only: start-up code may print without end
                assert proc.stdout is not None
                while chunk := proc.stdout.read(65_536):
                    kept.extend(chunk)
                    del kept[: max(0, len(kept) - MAX_PROBE_OUTPUT)]

            reader = threading.Thread(target=drain, daemon=True)
            reader.start()
            try:
                proc.wait(timeout=PROBE_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass
            finally:
                # Nothing the probe started outlives it (a `.pth` may start a process holding the pipe).
                kill_and_reap(proc)
                reader.join(timeout=5)
    except Exception as exc:  # cannot start, or the sandbox tier cannot confine it: not pinned
        log.warning("the gate interpreter probe of %s could not run: %s", interpreter, exc)
        return None
    stdout = bytes(kept)
    # The last marked line: a start-up file that prints a forged one first does not win.
    lines = [line for line in stdout.decode("utf-8", "replace").split("\n") if line.startswith(_MARK)]
    if proc.returncode != 0 or not lines:
        return None
    try:
        data = json.loads(lines[-1][len(_MARK) :])
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _runner_files(reported: object, tag: object, workspace: str, sites: Sequence[str]) -> list[PinnedFile]:
    """The distribution's own Python files (e.g. all of `_pytest/` for `pytest`) and the bytecode
    Python would load for each, digested by the server; not the workspace's own source outside
    any site folder (a project installed in editable mode: its source is meant to change), while
    a project `.venv`'s site-packages, inside the workspace, is pinned like any other."""
    if not isinstance(reported, list):
        return []
    out: list[PinnedFile] = []
    for path in reported[:MAX_RUNNER_FILES]:
        if not isinstance(path, str) or not os.path.isabs(path) or not path.endswith(".py"):
            continue
        real = os.path.realpath(path)
        if not _outside(real, workspace) and all(_outside(real, site) for site in sites):
            continue
        out.append(PinnedFile(f"{_RUNNER_WHAT}{real}", real, file_digest(real)))
        if isinstance(tag, str) and re.fullmatch(r"[A-Za-z0-9_.-]+", tag):
            folder, name = os.path.split(real)
            cached = os.path.join(folder, "__pycache__", f"{name[:-3]}.{tag}.pyc")
            digest = file_digest(cached)
            if digest is not None:  # one written later is a compile, not a change (see `differences`)
                out.append(PinnedFile(f"{_CACHE_WHAT}{cached}", cached, digest))
    return out


def _startup_files(folder: str) -> list[PinnedFile]:
    """The files a site folder runs at every interpreter start, digested by the server itself, and
    each installed distribution's `entry_points.txt` (runners load plugins from them: a new
    `pytest11` entry point is code in every pytest run)."""
    out: list[PinnedFile] = []
    try:
        with os.scandir(folder) as entries:
            for count, entry in enumerate(entries):
                if count >= MAX_SITE_ENTRIES:
                    out.append(PinnedFile(f"site folder {folder}: listing cut", folder, None))
                    break
                if entry.name.endswith(".pth") or entry.name in _STARTUP_NAMES:
                    path = os.path.join(folder, entry.name)
                    out.append(PinnedFile(f"{_STARTUP_WHAT}{path}", path, file_digest(path)))
                elif entry.name.endswith((".dist-info", ".egg-info")):
                    path = os.path.join(folder, entry.name, "entry_points.txt")
                    digest = file_digest(path)
                    if digest is not None:
                        out.append(PinnedFile(f"{_PLUGIN_WHAT}{path}", path, digest))
    except OSError:
        pass
    return out
