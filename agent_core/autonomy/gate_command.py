"""A gate's shell command read as words: its simple commands (`a && b; c | d`), each one's program
and arguments (assignments and `exec`/`env`/`nice`... skipped), and the module of `python -m X`.
A parse, not a shell: an unbalanced quote falls back to splitting on whitespace.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", "\n", "|&", ";;"})
_PREFIX_WORDS = frozenset({"exec", "command", "env", "nohup", "time", "nice", "builtin"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def shell_words(command: str) -> list[str]:
    """The command's words and operators, comments dropped."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()\n")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        return list(lexer)
    except ValueError:
        return command.split()


def simple_commands(command: str) -> list[list[str]]:
    """The words of each simple command, split at the shell's operators."""
    commands: list[list[str]] = [[]]
    for token in shell_words(command):
        if token in _SEPARATORS or set(token) <= set(";&|()\n"):
            if commands[-1]:
                commands.append([])
            continue
        commands[-1].append(token)
    return [c for c in commands if c]


def program_and_args(words: Sequence[str]) -> tuple[str, list[str]] | None:
    """The program a simple command runs and its arguments; None when it runs none."""
    index = 0
    while index < len(words) and (_ASSIGNMENT.match(words[index]) or words[index] in _PREFIX_WORDS):
        index += 1
    while index < len(words) and words[index].startswith("-") and index > 0:
        index += 1  # `env -i`, `nice -n`: their options (a value after one is taken as the program)
    if index >= len(words):
        return None
    return words[index], list(words[index + 1 :])


def module_argument(args: Sequence[str]) -> str | None:
    """`X` of `python [options] -m X ...` (None when it runs a script, `-c` or nothing)."""
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "-m":
            return args[index + 1] if index + 1 < len(args) else None
        if arg.startswith("-m") and len(arg) > 2:
            return arg[2:]
        if arg in ("-c", "-") or not arg.startswith("-"):
            return None
        index += 2 if arg in ("-W", "-X", "-Q") else 1
    return None
