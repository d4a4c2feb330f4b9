"""The one rule for what a kernel-to-server call may touch on disk: allow, or refuse with a reason.

A host call (`editor.read`, `editor.write`, a subagent's `cwd`) is performed by the server, which
is not confined the way the kernel is; the call is judged here like a cell's own write, the same
on every backend, so a cell cannot use the server to reach what its own confinement (or the
referee's check after the cell) keeps from it.

Refused to every host call, read or write:
* `/proc`, `/sys`, `/dev`: the server's own process (its environment, its stdin) and devices;
* the server's data dir, config file and runtime dirs (other sessions' transcripts, the model key,
  kernel connection files).

Refused to writes:
* any `.continual-acp/` (the session's, its repository's, a nested one): the referee's; harness
  entries change through `harness.*`, gates through the user;
* any `.git` (a directory or a `.git` file) and any git dir a `.git` file points at;
* the `protected_paths` of the session's config.

Outside the workspace (the session's cwd) a call may do only what the kernel itself could do there
on its backend: a local kernel may read and write anything its user may; a sandboxed kernel reads
the machine but writes only its workspace (and bubblewrap's private `/tmp` is not the server's); a
remote kernel (gateway, provisioner) reaches nothing of this machine but the workspace the server
serves it.

Refusals are case-insensitive (a case-insensitive file system opens `.GIT/config` as `.git/config`);
what is allowed (inside the workspace) is matched exactly. Every path is judged twice, as written
(normalised, `..` folded) and resolved (`realpath`: a symlink into a refused area is refused).

Writes are refused rather than held for review: nothing is written, so there is nothing to restore,
and the cell learns at once (a `PermissionError`) instead of after it ends.

`decide` is pure; `resolve_target` and `build_context` read the file system (call them off the
event loop: every path here is the workspace's to control).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "Access",
    "Decision",
    "HostCallContext",
    "PolicyInputs",
    "Target",
    "build_context",
    "decide",
    "resolve_target",
]

Access = Literal["read", "write"]

CONTROL_DIR = ".continual-acp"
GIT_DIR = ".git"
SYSTEM_TREES = ("/proc", "/sys", "/dev")
# kernel_bridge's runtime dirs under the temp dir: a server's (`cacp-*`, with an owner file) and a
# host bridge's own socket dir (`cacp-bridge-*`).
RUNTIME_PREFIX = "cacp-"
BRIDGE_PREFIX = "cacp-bridge-"
OWNER_FILE = "owner"


@dataclass(frozen=True, slots=True)
class HostCallContext:
    """What the policy knows of one session when it judges a call (all paths absolute, resolved)."""

    workspace: str
    control_dirs: tuple[str, ...]  # `.continual-acp` of the cwd and of the repository root
    git_dirs: tuple[str, ...]  # where the workspace's repository keeps its git data
    protected: tuple[str, ...]
    server_dirs: tuple[str, ...]  # data dir, config dir, runtime dirs
    outside_reads: bool  # the kernel itself can read this machine outside the workspace
    outside_writes: bool  # ... and write it
    hidden: tuple[str, ...] = ()  # outside the workspace, what the kernel cannot see (a private /tmp)


@dataclass(frozen=True, slots=True)
class Target:
    """A path as the call named it (absolute, normalised) and as it resolves."""

    requested: str
    real: str
    git_dirs: tuple[str, ...] = ()  # git dirs that `.git` files above `real` point at
    runtime_dirs: tuple[str, ...] = ()  # a server runtime dir (any server's) the path is in


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str = ""


ALLOW = Decision(True)


@dataclass(frozen=True, slots=True)
class PolicyInputs:
    """What a session knows once (its config and its kernel's backend); `build_context` resolves it
    per call, so a symlink swapped in after the session started is seen."""

    cwd: str
    home: str
    config_file: str | None = None
    protected: tuple[str, ...] = ()  # as configured: relative to the cwd, or absolute
    runtime_dirs: tuple[str, ...] = ()
    backend: str = "local"  # kernel_bridge's `KernelGuarantees.backend`
    confined: bool = False
    tier: str | None = None


# ---------------------------------------------------------------- paths


def _fold(path: str) -> str:
    return os.path.normcase(path).casefold()


def _within(path: str, root: str, *, fold: bool) -> bool:
    if fold:
        path, root = _fold(path), _fold(root)
    if root == os.sep:
        return True
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _parts(path: str) -> list[str]:
    return [_fold(p) for p in path.split(os.sep) if p]


def _show(path: str, ctx: HostCallContext) -> str:
    """`path` relative to the workspace when it is inside (the message the model reads)."""
    if _within(path, ctx.workspace, fold=False) and path != ctx.workspace:
        return os.path.relpath(path, ctx.workspace)
    return path


# ---------------------------------------------------------------- the rule


def decide(op: str, access: Access, target: Target, ctx: HostCallContext) -> Decision:
    """Whether `op` may `access` `target` in the session `ctx` describes; pure."""
    both = (target.requested, target.real)
    shown = _show(target.requested, ctx)
    for path in both:
        for tree in SYSTEM_TREES:
            if _within(path, tree, fold=True):
                return Decision(
                    False,
                    f"{op}: {shown} is in {tree}, the server's own process and devices; "
                    "host calls never touch /proc, /sys or /dev",
                )
        for root in (*ctx.server_dirs, *target.runtime_dirs):
            if _within(path, root, fold=True):
                return Decision(
                    False,
                    f"{op}: {shown} is in the server's data, config or runtime directory "
                    f"({root}); host calls never touch it",
                )
    if access == "write":
        refused = _write_refusal(op, target, ctx, shown)
        if refused is not None:
            return refused
    inside = _within(target.real, ctx.workspace, fold=False)
    if inside:
        return ALLOW
    if access == "write" and not ctx.outside_writes:
        return Decision(
            False,
            f"{op}: {shown} is outside the workspace ({ctx.workspace}), which is all a kernel on "
            "this backend may write",
        )
    if access == "read":
        if not ctx.outside_reads:
            return Decision(
                False,
                f"{op}: {shown} is outside the workspace ({ctx.workspace}); a kernel on this backend "
                "cannot read this machine's files beyond it",
            )
        for hidden in ctx.hidden:
            if _within(target.real, hidden, fold=False):
                return Decision(
                    False, f"{op}: {shown} is in {hidden}, which the kernel's sandbox hides from it"
                )
    return ALLOW


def _write_refusal(op: str, target: Target, ctx: HostCallContext, shown: str) -> Decision | None:
    both = (target.requested, target.real)
    for path in both:
        parts = _parts(path)
        if CONTROL_DIR in parts or any(_within(path, d, fold=True) for d in ctx.control_dirs):
            return Decision(
                False,
                f"{op}: {shown} is in .continual-acp/, the referee's: harness entries change through "
                "harness.* (reviewed), gates only by the user",
            )
    for path in both:
        if _fold(GIT_DIR) in _parts(path) or any(
            _within(path, d, fold=True) for d in (*ctx.git_dirs, *target.git_dirs)
        ):
            return Decision(False, f"{op}: {shown} is git's own data (.git); host calls never write it")
    for path in both:
        for protected in ctx.protected:
            if _within(path, protected, fold=True):
                return Decision(
                    False,
                    f"{op}: {shown} is a protected path (protected_paths: {_show(protected, ctx)}); "
                    "only the user changes it",
                )
    return None


# ---------------------------------------------------------------- the file system side


def _real(path: str) -> str:
    return os.path.realpath(path)


def _small_text(path: str) -> str:
    """The head of a small regular file ("" for anything else): never blocks on a FIFO."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return os.read(fd, 4096).decode("utf-8", "replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def _gitdir_of(dot_git: str) -> tuple[str, ...]:
    """The git dirs a `.git` file points at (`gitdir: ...`, and that dir's `commondir`)."""
    head = _small_text(dot_git)
    line = head.splitlines()[0] if head else ""
    if not line.startswith("gitdir:"):
        return ()
    found = [_real(os.path.join(os.path.dirname(dot_git), line[len("gitdir:") :].strip()))]
    common = _small_text(os.path.join(found[0], "commondir")).strip()
    if common:
        found.append(_real(os.path.join(found[0], common)))
    return tuple(found)


def _is_git_dir(path: str) -> bool:
    """`path` holds a repository's data (a bare repository, a separate git dir, a linked checkout's git dir)."""
    if not os.path.isfile(os.path.join(path, "HEAD")):
        return False
    has_objects = os.path.isdir(os.path.join(path, "objects")) and os.path.isdir(os.path.join(path, "refs"))
    return has_objects or os.path.isfile(os.path.join(path, "commondir"))


def _git_dirs_above(path: str) -> tuple[str, ...]:
    """The git dirs of every `.git` (directory or file) in `path` and its ancestors, and every
    ancestor that is itself a git dir (wherever a `.git` file we never saw points from)."""
    found: list[str] = []
    current = path
    while True:
        dot_git = os.path.join(current, GIT_DIR)
        if os.path.isfile(dot_git):
            found += _gitdir_of(dot_git)
        elif os.path.isdir(dot_git):
            found.append(_real(dot_git))
        if _is_git_dir(current):
            found.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return tuple(dict.fromkeys(found))


def resolve_target(path: str, cwd: str) -> Target:
    """`path` (relative to `cwd`, or absolute) as written and as it resolves, with the git dirs that
    `.git` files above it point at and the server runtime dir it is in, if any."""
    requested = os.path.normpath(path if os.path.isabs(path) else os.path.join(cwd, path))
    real = _real(requested)
    runtime = tuple(dict.fromkeys(d for d in (_runtime_dir_of(requested), _runtime_dir_of(real)) if d))
    return Target(requested, real, _git_dirs_above(os.path.dirname(real)), runtime)


def _temp_dir() -> str:
    import tempfile  # here: the session imports this module before its first answer

    return tempfile.gettempdir()


def _runtime_dir_of(path: str) -> str | None:
    """The runtime dir `path` is in, when it is in one (any server's, in the temp dir): a server's
    holds an owner file, a bridge's own socket dir has its prefix; a user's folder that merely
    shares the prefix is neither."""
    tmp = _temp_dir()
    if not _within(path, tmp, fold=False) or path == tmp:
        return None
    top = os.path.join(tmp, os.path.relpath(path, tmp).split(os.sep)[0])
    name = os.path.basename(top).lstrip(".")
    if not name.startswith(RUNTIME_PREFIX) or not os.path.isdir(top):
        return None
    if name.startswith(BRIDGE_PREFIX) or os.path.isfile(os.path.join(top, OWNER_FILE)):
        return top
    return None


def _both(paths: Sequence[str]) -> tuple[str, ...]:
    """Each path as given and resolved (a refusal holds for either spelling)."""
    out: list[str] = []
    for path in paths:
        out += [os.path.normpath(path), _real(path)]
    return tuple(dict.fromkeys(out))


def build_context(inputs: PolicyInputs) -> HostCallContext:
    """The context for one call, resolved now."""
    cwd = os.path.abspath(inputs.cwd)
    workspace = _real(cwd)
    # Every ancestor's `.continual-acp` (the cwd's, the repository root's): by name the component
    # rule refuses them; one that is a symlink is refused where it points too.
    control: list[str] = []
    for ancestor in _ancestors(workspace):
        path = os.path.join(ancestor, CONTROL_DIR)
        control += [path, _real(path)] if os.path.islink(path) else [path]
    protected = [
        p if os.path.isabs(p) else os.path.join(cwd, p) for p in map(os.path.expanduser, inputs.protected)
    ]
    server = [inputs.home, *inputs.runtime_dirs]
    if inputs.config_file:
        server.append(inputs.config_file)
    local_machine = inputs.backend == "local" or (inputs.backend == "sandbox" and not inputs.confined)
    sandboxed = inputs.backend == "sandbox" and inputs.confined
    # bubblewrap mounts a private tmpfs on /tmp itself (whatever TMPDIR says).
    hidden = (_real("/tmp"),) if sandboxed and inputs.tier == "bubblewrap" else ()
    return HostCallContext(
        workspace=workspace,
        control_dirs=tuple(control),
        git_dirs=_git_dirs_above(workspace),
        protected=_both(protected),
        server_dirs=_both(server),
        outside_reads=local_machine or sandboxed,
        outside_writes=local_machine,
        hidden=hidden,
    )


def _ancestors(path: str) -> list[str]:
    out = [path]
    while os.path.dirname(out[-1]) != out[-1]:
        out.append(os.path.dirname(out[-1]))
    return out
