"""The one process-group watch: when continual-acp dies, whatever it started dies with it (stdlib only).

Everything continual-acp starts that may spawn processes of its own -- kernels, stdio MCP servers,
autonomy gates -- leads a process group. An orderly exit kills those groups (`reaper`, the MCP
SDK's shutdown, the gate runner), but SIGKILL of the server runs no cleanup, so each group watches
its parent and SIGKILLs itself when the parent pid changes (the orphan is reparented).

Two ways in, one watch loop (`ParentWatch`):

* In process: a kernel runs `ParentWatch(parent).start()`. The kernel may run under an interpreter
  that cannot import kernel_bridge, so the launcher embeds this file's code above the host-only
  part (`embeddable_source()`) into the kernel's `-c` launch code.
* As a script, for a command that is not Python of ours (an MCP server, a gate's shell):

      python -I -S group_watch.py <parent-pid> -- <command> [args...]

  It leads its own process group (started in a new session, or it makes one), forks the command
  into that group and waits for it. Its exit code is the command's (128+N when signal N killed it,
  as a shell reports). It drops its own copies of stdin and stdout, so only the command holds the
  caller's pipes (its exit, or its closing stdout, is EOF for the reader); stderr is kept for the
  watch's own messages. The group is SIGKILLed when the parent goes away and on SIGTERM or SIGHUP
  of the watcher (the MCP SDK's shutdown escalation): nothing in the group outlives it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

POLL_SECONDS = 0.25  # how soon a dead parent is noticed; one getppid() per poll


def end_group(code: int = 1) -> None:
    """SIGKILL this process's group when this process leads it (which ends this process too);
    otherwise the group is someone else's (a sandbox wrapper leads it): exit alone with `code`."""
    if os.getpgrp() == os.getpid():
        # Not `host_base.process_groups.kill_group`: this file also runs as a standalone script
        # (`python -I -S group_watch.py`), which imports nothing of the project, and the group it
        # ends is its own (pgid 0), which `kill_group` refuses by design.
        os.killpg(0, signal.SIGKILL)
    os._exit(code)


class ParentWatch(threading.Thread):
    """A daemon thread that calls `end_group()` once the parent process `parent_pid` has gone."""

    def __init__(self, parent_pid: int, interval: float = POLL_SECONDS) -> None:
        super().__init__(daemon=True, name="continual-acp-parent-watch")
        self.parent_pid = parent_pid
        self.interval = interval

    def run(self) -> None:
        while os.getppid() == self.parent_pid:
            time.sleep(self.interval)  # polling: no portable way to wait for a parent's death
        end_group()


def _on_signal(signum: int, frame: object) -> None:
    end_group(128 + signum)


# Linux prctl/capset numbers (linux/prctl.h, linux/capability.h).
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_CAP_VERSION_3 = 0x20080522
_CAP_FIELDS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")


def capability_sets() -> dict[str, int]:
    """This process's capability sets from /proc/self/status (empty where there is no /proc)."""
    found: dict[str, int] = {}
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                name, _, value = line.partition(":")
                if name in _CAP_FIELDS:
                    found[name] = int(value.strip(), 16)
    except OSError:
        pass
    return found


def holds_capabilities() -> bool:
    """Whether a program this process execs would run with capabilities: it holds some, or it is root
    with a bounding set (root regains the bounding set at every exec)."""
    sets = capability_sets()
    if any(sets.get(name, 0) for name in ("CapInh", "CapPrm", "CapEff", "CapAmb")):
        return True
    return os.getuid() == 0 and sets.get("CapBnd", 0) != 0


def drop_capabilities() -> str | None:
    """Linux, when this process holds capabilities (root, or granted ones): empty the bounding,
    inheritable, permitted, effective and ambient sets and set no_new_privs, for this process and
    everything it execs. A root server's kernels, gates and MCP servers then cannot use
    CAP_SYS_PTRACE (or any other) to read the server's /proc entries, which it keeps non-dumpable.
    Returns None when done or not needed, else why it could not (the caller says so)."""
    if not sys.platform.startswith("linux") or not holds_capabilities():
        return None
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as f:
            last = int(f.read().strip())
        for cap in range(last + 1):
            if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), f"PR_CAPBSET_DROP {cap}")
        libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # EINVAL before Linux 4.3: none then

        class Header(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        class Data(ctypes.Structure):
            _fields_ = [(name, ctypes.c_uint32) for name in ("effective", "permitted", "inheritable")]

        empty = (Data * 2)()
        if libc.capset(ctypes.byref(Header(_CAP_VERSION_3, 0)), empty) != 0:
            raise OSError(ctypes.get_errno(), "capset")
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    except (OSError, ValueError, AttributeError) as exc:
        return f"could not drop capabilities: {exc}"
    return None


def exit_code(status: int) -> int:
    """A wait status as a shell reports it: the exit code, or 128+N for a death by signal N."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def exec_without_capabilities(command: list[str]) -> int:
    """`exec` mode: drop the capabilities, then become `command` (same pid, no watch). For a program
    whose own start runs code a workspace controls (an interpreter's site-packages, `.pth` files,
    `sitecustomize`) before it could drop them itself: a kernel's interpreter."""
    problem = drop_capabilities()
    if problem is not None:
        sys.stderr.write(f"continual-acp: {problem}\n")
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"cannot start {command[0]!r}: {exc}\n")
    return 127


def main(argv: list[str]) -> int:
    """The script: run `argv[3:]` in this process's group, watched; return its exit code. With
    `exec` for the parent pid: drop the capabilities and exec the command instead."""
    if len(argv) >= 4 and argv[1] == "exec" and argv[2] == "--":
        return exec_without_capabilities(argv[3:])
    if len(argv) < 4 or argv[2] != "--" or not argv[1].isdigit():
        sys.stderr.write("usage: group_watch.py <parent-pid> -- <command> [args...]\n")
        return 2
    parent, command = int(argv[1]), argv[3:]
    problem = drop_capabilities()  # the watch and its command both run without capabilities
    if problem is not None:
        sys.stderr.write(f"continual-acp group watch: {problem}\n")
    if os.getpgrp() != os.getpid():
        os.setsid()  # a group of our own: killing it must never reach the caller's
    # Before the fork, so no SIGTERM can land between it and an unwatched child; exec resets them.
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGHUP, _on_signal)
    child = os.fork()
    if child == 0:
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            os.write(2, f"cannot start {command[0]!r}: {exc}\n".encode())
        os._exit(127)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    ParentWatch(parent).start()  # checks at once: a parent gone already ends the group now
    _pid, status = os.waitpid(child, 0)  # a signal handler above ends the group mid-wait
    return exit_code(status)


# --- host side only: the launcher embeds everything above this line into a kernel's launch code ---
_MARKER = "# --- host side only:"


def script_path() -> str:
    """The absolute path of this file, to run as the watch script."""
    return os.path.abspath(__file__)


def _script(embedded: bool) -> list[str]:
    """This interpreter running the watch: the file by its path, or (`embedded`) its code given with
    `-c`, for a sandbox that does not show this file (bubblewrap's private /tmp hides a clone there)."""
    if embedded:
        return [sys.executable, "-I", "-S", "-c", embeddable_source() + "sys.exit(main(sys.argv))\n"]
    return [sys.executable, "-I", "-S", script_path()]


def watched_argv(command: list[str], parent_pid: int | None = None, *, embedded: bool = False) -> list[str]:
    """`command` run under the watch script by this interpreter, watching `parent_pid` (this process)."""
    parent = os.getpid() if parent_pid is None else parent_pid
    return [*_script(embedded), str(parent), "--", *command]


def exec_argv(*, embedded: bool = False) -> list[str]:
    """The prefix that runs a command without capabilities, in place (`exec` mode of the script)."""
    return [*_script(embedded), "exec", "--"]


def embeddable_source() -> str:
    """This module's code above the host-only part: defines `ParentWatch` and `end_group` when run
    as the start of another program (a kernel's `-c` launch code)."""
    with open(script_path(), encoding="utf-8") as f:
        source = f.read()
    head, found, _rest = source.partition("\n" + _MARKER)
    if not found:
        raise RuntimeError(f"{script_path()} lost its host-side marker line")
    return head + "\n"


if __name__ == "__main__":
    sys.exit(main(sys.argv))
