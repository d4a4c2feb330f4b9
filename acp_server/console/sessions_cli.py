"""`continual-acp sessions` (also `continual-acp harness sessions`): the session ids for `--session`.

Lists the saved sessions, newest first, with their cwd, title and last activity, from the data dir
(`CONTINUAL_ACP_HOME`, as the server uses it); `--cwd DIR` keeps one project's, `--json` prints them
for scripts. Reads only: nothing is opened, locked or written.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="continual-acp sessions",
        description="List saved sessions (newest first): the ids `harness --session ID` and session/load take.",
    )
    parser.add_argument("--cwd", metavar="DIR", help="only sessions whose working directory is DIR")
    parser.add_argument("--json", action="store_true", help="print machine-readable output")
    parser.add_argument("-n", type=int, default=0, metavar="N", help="at most N sessions (default: all)")
    return parser


def main(argv: Sequence[str]) -> int:
    """List the sessions; exit 1 with a message on stderr when the config is invalid."""
    args = _parser().parse_args(list(argv))
    from agent_core import SessionStore, load_config

    try:
        config = load_config()
    except ValueError as exc:
        print(f"continual-acp sessions: error: {exc}", file=sys.stderr)
        return 1
    store = SessionStore(config.home)
    found = []
    cursor: str | None = None
    while True:
        page = store.list(args.cwd, cursor, 200)
        found.extend(page.sessions)
        cursor = page.next_cursor
        if cursor is None or (args.n and len(found) >= args.n):
            break
    if args.n:
        found = found[: args.n]
    if args.json:
        rows = [
            {"sessionId": s.session_id, "cwd": s.cwd, "title": s.title, "updatedAt": s.updated_at}
            for s in found
        ]
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    if not found:
        where = f" for {args.cwd}" if args.cwd else ""
        print(f"no sessions{where} in {config.sessions_dir}")
        return 0
    for s in found:
        print(f"{s.session_id}  {s.updated_at}  {s.cwd}  {s.title or '(untitled)'}")
    return 0
