"""Runs one stdio MCP server and kills its process group when continual-acp dies (stdlib only).

    python -I -S guard.py <parent-pid> -- <command> [args...]

The SDK starts this in a new session, so it leads the group; the server is its child in the same
group with the pipes handed over (this process drops its own copies, so the server's exit is EOF
for the host). If the parent goes away -- including SIGKILL, which runs no cleanup -- the guard
notices within a poll interval and SIGKILLs the whole group, so neither the server nor anything it
spawned is orphaned. SIGTERM (the SDK's shutdown escalation) does the same.
"""

import os
import signal
import sys

POLL_SECONDS = 0.25


def _kill_group(*_args: object) -> None:
    os.killpg(os.getpgrp(), signal.SIGKILL)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: guard.py <parent-pid> -- <command> [args...]\n")
        return 2
    parent, command = int(argv[1]), argv[3:]
    signal.signal(signal.SIGCHLD, lambda *_: None)  # so sigtimedwait wakes on the child's exit
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    child = os.fork()
    if child == 0:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            os.write(2, f"cannot start MCP server {command[0]!r}: {exc}\n".encode())
            os._exit(127)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    signal.signal(signal.SIGTERM, _kill_group)
    signal.signal(signal.SIGHUP, _kill_group)
    while True:
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            return code if code >= 0 else 128 - code  # killed by signal N: the shell's 128+N
        if os.getppid() != parent:
            _kill_group()
        signal.sigtimedwait({signal.SIGCHLD}, POLL_SECONDS)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
