"""Every `git` the server runs: no program the repository configures may run with the server's authority.

A repository (or a cell writing into it) names programs git runs on its own: `core.fsmonitor`
(run by `git status`), hooks, `core.pager`, `diff.external` and per-driver `diff.<x>.command` /
`textconv`, `filter.<x>.clean` / `smudge` / `process` (named by `.gitattributes`, run by status,
diff, stash and apply), `core.sshCommand`, credential helpers. Two layers:

1. **Switched off** on the command line, which outranks every config file: the fixed `-c` list
   below, `--no-ext-diff --no-textconv` where the subcommand takes them, and every filter and
   diff driver command any config level names, emptied: read by `git config --get-regexp` (which
   runs nothing) right before the command, in the same watched process (a small `sh` step passing
   them as `GIT_CONFIG_KEY_<n>`/`GIT_CONFIG_VALUE_<n>`, the command line's scope). In-tree `.gitattributes` cannot be switched off (`core.attributesFile`
   covers only the global file), but an attribute naming a driver with no command runs nothing.
   The environment: no inherited `GIT_*` (a `GIT_DIR`, `GIT_EXTERNAL_DIFF` or
   `GIT_CONFIG_PARAMETERS` of the server's), `GIT_CONFIG_NOSYSTEM=1`, `GIT_TERMINAL_PROMPT=0`,
   `GIT_OPTIONAL_LOCKS=0`, no pager.
2. **Nothing to steal**: git runs through `workspace_launch` (scrubbed environment, no capabilities,
   `no_new_privs`, no inherited descriptors, its own process group), so a program git still runs
   (a submodule's driver, something git adds later) gets no key, no pipe of the server's and no
   way into `/proc/<server>`. Git is not put under the sandbox's confinement: the server's own
   git writes `.git` (the objects of a workspace checkpoint), which the confinement makes read-only.

`safe.directory` is left to the user's configuration (never `*`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from kernel_bridge import workspace_launch
from kernel_bridge.workspace_launch import RunResult

__all__ = ["SAFE_CONFIG", "git_argv", "git_environment", "run_git"]

# `-c` settings that outrank the repository's config: no program named by it runs.
SAFE_CONFIG: tuple[str, ...] = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "core.sshCommand=",
    "core.askPass=",
    "credential.helper=",
    "diff.external=",
    "protocol.allow=never",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
)
# Subcommands that print diffs and accept the switches that stop external diffs and textconv.
_DIFFING = frozenset({"diff", "log", "show"})
# Run under the watch as `sh -c _DRIVERS_OFF sh <repo> <git argv...>`: every filter and diff driver
# command any config level names (includes followed) is emptied for the git that follows. Config
# key names cannot hold a newline, so one per line is safe; `set -f`: no globbing of a name.
_DRIVERS_OFF = r"""
IFS='
'
set -f
i=0
for key in $(git -C "$1" config --name-only --get-regexp '^(filter|diff)\.' 2>/dev/null); do
  case $key in
    filter.*.required) value=false ;;
    filter.*.clean|filter.*.smudge|filter.*.process|diff.*.command|diff.*.textconv) value= ;;
    *) continue ;;
  esac
  export "GIT_CONFIG_KEY_$i=$key" "GIT_CONFIG_VALUE_$i=$value"
  i=$((i + 1))
done
export GIT_CONFIG_COUNT=$i
shift
exec "$@"
"""


def git_environment(
    base: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a server git: the workspace environment without any `GIT_*` variable,
    plus the ones that keep git from prompting, paging, locking or reading the system config."""
    env = {k: v for k, v in workspace_launch.workspace_environment(base).items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_ATTR_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        GIT_PAGER="cat",
        PAGER="cat",
    )
    env.pop("SSH_ASKPASS", None)
    if extra:
        env.update(extra)
    return env


def git_argv(
    repo: str | os.PathLike[str], args: Sequence[str], *, config: Mapping[str, str] | None = None
) -> list[str]:
    """`git -C repo -c ... <args>` with the fixed safe settings, then `config` (the caller's own,
    e.g. an author name), and the no-external-diff switches after a diffing subcommand."""
    argv = ["git", "-C", os.fspath(repo)]
    for item in SAFE_CONFIG:
        argv += ["-c", item]
    for key, value in (config or {}).items():
        argv += ["-c", f"{key}={value}"]
    if args and args[0] in _DIFFING:
        return [*argv, args[0], "--no-ext-diff", "--no-textconv", *args[1:]]
    return [*argv, *args]


def run_git(
    repo: str | os.PathLike[str] | Path,
    *args: str,
    config: Mapping[str, str] | None = None,
    input: bytes | None = None,
    timeout: float = 60.0,
    env: Mapping[str, str] | None = None,
) -> RunResult:
    """Run `git -C repo <args>` safely (see the module docstring), blocking: call it off the event
    loop. `env` adds variables (e.g. `LC_ALL`). A timeout kills git's group (`returncode` None);
    raises OSError when git cannot be started."""
    repo = os.path.abspath(repo)
    full_env = git_environment(extra=env)
    command = ["/bin/sh", "-c", _DRIVERS_OFF, "sh", repo, *git_argv(repo, args, config=config)]
    # `policy` scrubs `full_env` again: the variables set above are no secrets and pass unchanged.
    with workspace_launch.policy(repo, full_env, confine=False) as launch:
        return workspace_launch.run(command, launch, input=input, timeout=timeout)
