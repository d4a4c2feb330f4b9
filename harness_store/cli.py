"""`continual-acp harness ...`: the store from a terminal.

    list [--scope global|local] [--session ID] [--kind K]
    show <entry-or-refinement-id> [--session ID]
    history [-n N] [--session ID]
    rollback <refinement-id> [--force] [--session ID]
    tombstones [--lift TOMBSTONE-ID] [--session ID]
    import <proposal.json> [--scope global|local|project] [--session ID] [--repo PATH] [--no-verify]
    conflicts --repo PATH
    resolve <kind>/<id> <side> --repo PATH
    curate [--scope global|local|project] [--session ID] [--repo PATH] [--apply]

`--scope project --repo PATH` (or `--repo PATH` alone) uses the project store committed in that
repository (`<repo>/.continual-acp/harness`). `import` applies a proposal file (trigger `cli`); its
skills are checked in a scratch kernel first when the console script supplies a checker
(`main(argv, verifier_factory=...)`), and the result says so when they were not (`--no-verify`).
    sessions [--cwd DIR]   (handled by acp_server/console/sessions_cli.py: the ids for --session)

`curate` prints the curator's dry-run report (curator.py); `--apply` applies the pass as one
refinement (`rollback <id>` undoes it). The entries' standing (harmful, unfollowed) comes from the
`standing_factory` the console script supplies; without one only content-free entries and
duplicates are proposed.

`--json` anywhere prints machine-readable output. The data dir is `CONTINUAL_ACP_HOME` (see
`paths.data_home`). Errors go to stderr with exit code 1.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from pydantic import BaseModel

from harness_store.curator import StandingOf, plan_curation
from harness_store.errors import HarnessStoreError
from harness_store.models import KINDS, HarnessEntry, RefinementResult
from harness_store.paths import data_home, global_root, local_root
from harness_store.project import ProjectStore
from harness_store.store import HarnessStore, RefinementNotFound, Store
from harness_store.verify import PreApplyVerifier, Verdict
from harness_store.views import render_view

# (scope, cwd) -> the pre-apply skill verifier the composition root builds.
VerifierFactory = Callable[[str, Path], PreApplyVerifier]
# data home -> an entry's standing from its counters (agent_core/trust/entry_counters.py).
StandingFactory = Callable[[Path], StandingOf]


class CliError(Exception):
    """A user-facing error: printed to stderr, exit code 1."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise CliError(f"{message}\n{self.format_usage().strip()}")


def _count(text: str) -> int:
    """A non-negative integer option value."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument("--session", metavar="ID", help="a session id: use that session's local store")
    common.add_argument("--repo", metavar="PATH", help="a repository: use its project store")
    parser = _Parser(
        prog="continual-acp harness",
        description="Inspect and roll back the continual harness.",
        epilog="Session ids for --session: `continual-acp sessions` (or `continual-acp harness sessions`).",
    )
    # Stripped by `main` wherever it appears; declared here so `--help` lists it.
    parser.add_argument("--json", action="store_true", help="machine-readable output (anywhere in the line)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("list", parents=[common], help="list entries")
    p.add_argument(
        "--scope", choices=("global", "local", "project"), help="default: local with --session, else global"
    )
    p.add_argument("--kind", choices=KINDS)
    p = sub.add_parser("show", parents=[common], help="show an entry or a refinement with its snapshots")
    p.add_argument("id")
    p = sub.add_parser("history", parents=[common], help="list refinements, newest last")
    p.add_argument("-n", type=_count, default=20, metavar="N", help="how many (default 20; 0 = all)")
    p = sub.add_parser("rollback", parents=[common], help="roll back a refinement")
    p.add_argument("id")
    p.add_argument("--force", action="store_true", help="roll back even if entries changed since")
    p = sub.add_parser("tombstones", parents=[common], help="list (or lift) tombstones")
    p.add_argument("--lift", metavar="TOMBSTONE_ID", help="remove this tombstone")
    p = sub.add_parser("import", parents=[common], help="apply a proposal file (its skills are checked)")
    p.add_argument("file", help="a JSON proposal: {summary, rationale, edits: [...]}")
    p.add_argument("--scope", choices=("global", "local", "project"))
    p.add_argument("--no-verify", action="store_true", help="do not run skill checks (the result says so)")
    p = sub.add_parser("curate", parents=[common], help="the curator's pass: a dry-run report, or --apply")
    p.add_argument(
        "--scope", choices=("global", "local", "project"), help="default: local with --session, else global"
    )
    p.add_argument(
        "--apply", action="store_true", help="apply the pass as one refinement (rollback undoes it)"
    )
    sub.add_parser("conflicts", parents=[common], help="entries changed on both sides of a git merge")
    p = sub.add_parser("resolve", parents=[common], help="end a merge conflict by taking one side")
    p.add_argument("entry", metavar="KIND/ID")
    p.add_argument("side", type=_count, help="which candidate `conflicts` listed (0, 1, ...)")
    # Served by `continual-acp` before this parser runs (they need the server's packages); listed
    # here so `harness --help` names every harness command.
    sub.add_parser("ui", help="the review panel in a browser (continual-acp harness ui --help)")
    sub.add_parser("sessions", help="list saved sessions (the ids for --session)")
    return parser


def _dump(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


def _stores(home: Path, session: str | None, scope: str | None, repo: str | None = None) -> list[Store]:
    if scope == "project" or (scope is None and repo):
        if not repo:
            raise CliError("--scope project needs --repo PATH")
        return [ProjectStore(Path(repo))]
    if scope == "local" or (scope is None and session):
        if not session:
            raise CliError("--scope local needs --session ID")
        return [HarnessStore(local_root(home, session))]
    return [HarnessStore(global_root(home))]


def _all_stores(home: Path, session: str | None) -> list[HarnessStore]:
    """Where to look for a refinement id: the named session, the global store, then every session."""
    stores = [HarnessStore(local_root(home, session))] if session else []
    stores.append(HarnessStore(global_root(home)))
    sessions = home / "sessions"
    if not session and sessions.is_dir():
        for child in sorted(sessions.iterdir()):
            if (child / "harness").is_dir():
                stores.append(HarnessStore(child / "harness"))
    return stores


def _find_refinement(
    home: Path, session: str | None, rid: str, repo: str | None = None
) -> tuple[Store, RefinementResult] | None:
    project: list[Store] = [ProjectStore(Path(repo))] if repo else []
    for store in [*project, *_all_stores(home, session)]:
        if store.history_path.exists():
            record = store.get_refinement(rid)
            if record is not None:
                return store, record
    return None


def _entry_line(e: HarnessEntry) -> str:
    return f"{e.kind:<9} {e.id:<32} {e.trust:<9} {e.scope:<6} v{e.version:<3} {e.title}"


def _result_line(r: RefinementResult) -> str:
    done = sum(1 for e in r.applied_edits if e.applied)
    extra = (
        f" (rollback of {r.rollback_of})"
        if r.rollback_of
        else f" (review of {r.review_of})"
        if r.review_of
        else ""
    )
    if r.tombstone_change:
        extra += "".join(f" (+tombstone {t.id})" for t in r.tombstoned)
        extra += "".join(f" (lifted tombstone {t.id})" for t in r.lifted)
    return f"{r.id}  {r.trigger:<8} {r.scope:<6} {done}/{len(r.applied_edits)} applied  {r.summary}{extra}"


def _change_lines(before: HarnessEntry, after: HarnessEntry) -> list[str]:
    """An entry's change as a unified diff of its view without the version line (which always moves:
    it is in the header), so a change in any field shows, even one the title and content do not."""

    def view(entry: HarnessEntry) -> list[str]:
        return [line for line in render_view(entry).splitlines() if not line.startswith("- version: ")]

    header = f"    v{before.version} -> v{after.version}"
    diff = list(difflib.unified_diff(view(before), view(after), "before", "after", lineterm="", n=1))
    if not diff:
        return [header + ": no field changed"]
    return [header + ":", *("      " + line for line in diff[2:])]  # [2:]: the ---/+++ file header


def _result_text(r: RefinementResult) -> str:
    lines = [
        _result_line(r),
        f"created {r.created_at}" + (f", session {r.session_id}" if r.session_id else ""),
    ]
    if r.rationale:
        lines.append(f"rationale: {r.rationale}")
    for e in r.applied_edits:
        status = "applied" if e.applied else f"refused: {e.error}"
        lines.append(f"  {e.action} {e.kind} {e.id or '?'}: {status}")
        if e.check:
            lines.append("    check: " + e.check.replace("\n", "\n      "))
        if e.before is not None and e.after is not None:
            lines += _change_lines(e.before, e.after)
        elif e.before is not None:
            lines.append(f"    before v{e.before.version}: {e.before.title} — {e.before.content}")
        elif e.after is not None:
            lines.append(f"    after  v{e.after.version}: {e.after.title} — {e.after.content}")
    for verb, stones in (("tombstoned", r.tombstoned), ("lifted", r.lifted)):
        lines += [f"  {verb} {t.kind} {t.id}{' (forever)' if t.forever else ''}: {t.content}" for t in stones]
    return "\n".join(lines)


def _run(
    args: argparse.Namespace,
    home: Path,
    as_json: bool,
    verifier_factory: VerifierFactory | None = None,
    standing_factory: StandingFactory | None = None,
) -> tuple[Any, str, int]:
    """Returns (json payload, human text, exit code)."""
    repo = getattr(args, "repo", None)
    if args.command == "import":
        return _import(args, home, repo, verifier_factory)
    if args.command == "curate":
        return _curate(args, home, repo, standing_factory)
    if args.command == "conflicts":
        if not repo:
            raise CliError("conflicts needs --repo PATH")
        clashes = ProjectStore(Path(repo)).conflicts()
        lines: list[str] = []
        for c in clashes:
            lines.append(f"{c.kind:<9} {c.entry_id:<32} {c.reason}")
            for number, side in enumerate(c.candidates):
                shown = (
                    "deleted" if side is None else f"{side.title} — {' '.join(side.content.split())[:100]}"
                )
                lines.append(f"  side {number}: {shown}")
        return [c.to_json() for c in clashes], "\n".join(lines) or "no conflicts", 1 if clashes else 0
    if args.command == "resolve":
        if not repo:
            raise CliError("resolve needs --repo PATH")
        kind, _, entry_id = args.entry.partition("/")
        if kind not in KINDS or not entry_id:
            raise CliError(f"name the entry as KIND/ID (KIND one of {', '.join(KINDS)}), not {args.entry!r}")
        try:
            result = ProjectStore(Path(repo)).resolve_conflict(kind, entry_id, args.side)
        except KeyError:
            raise CliError(f"{args.entry} is not in conflict; `conflicts --repo` lists them") from None
        except IndexError:
            raise CliError(f"{args.entry} has no side {args.side}; `conflicts --repo` lists them") from None
        return result, _result_text(result), 0 if result.applied else 1
    if args.command == "list":
        store = _stores(home, args.session, args.scope, repo)[0]
        state = store.load()
        kinds = [args.kind] if args.kind else list(KINDS)
        entries = [e for k in kinds for _, e in sorted(state.entries[k].items())]
        text = "\n".join(_entry_line(e) for e in entries) or f"no entries in {store.root}"
        return entries, text, 0
    if args.command == "history":
        store = _stores(home, args.session, None, repo)[0]
        records = store.history(None if args.n == 0 else args.n)
        return records, "\n".join(_result_line(r) for r in records) or f"no refinements in {store.root}", 0
    if args.command == "show":
        found = _find_refinement(home, args.session, args.id, repo)
        if found is not None:
            return found[1], _result_text(found[1]), 0
        stores: list[Store] = [HarnessStore(global_root(home))]
        if repo:
            stores.insert(0, ProjectStore(Path(repo)))
        if args.session:
            stores.insert(0, HarnessStore(local_root(home, args.session)))
        entries = [e for s in stores for e in s.load().find(args.id)]
        if not entries:
            raise CliError(
                f"no entry or refinement {args.id!r} under {home}; "
                "`continual-acp harness list` and `history` show the ids"
            )
        return entries, "\n\n".join(render_view(e) for e in entries), 0
    if args.command == "rollback":
        found = _find_refinement(home, args.session, args.id, repo)
        if found is None:
            raise CliError(
                f"no refinement {args.id!r} under {home}; `continual-acp harness history` shows the ids"
            )
        later = found[0].rolled_back_by(args.id)
        if later is not None:  # answered before any write: no history record for a no-op
            raise CliError(f"refinement {args.id} was already rolled back by {later}")
        result = found[0].rollback(args.id, force=args.force)
        refused = [e for e in result.applied_edits if not e.applied]
        text = _result_text(result)
        if refused:
            text += (
                "\nrollback refused; nothing was changed"
                if not result.applied
                else "\nsome edits were refused"
            )
            text += " (use --force to override a conflict)"
        return result, text, 1 if refused else 0
    if args.command == "tombstones":
        store = _stores(home, args.session, None, repo)[0]
        if args.lift:
            lifted = store.lift_tombstone(args.lift, trigger="cli")
            if lifted is None:
                raise CliError(f"no tombstone {args.lift!r} in {store.root}")
            return lifted, f"lifted tombstone {lifted.id} ({lifted.kind}): {lifted.content}", 0
        stones = store.tombstones()
        text = "\n".join(f"{t.id}  {t.kind:<9} {t.created_at}  {t.reason}: {t.content}" for t in stones)
        return stones, text or f"no tombstones in {store.root}", 0
    raise CliError(f"unknown command {args.command}")


def _import(
    args: argparse.Namespace, home: Path, repo: str | None, verifier_factory: VerifierFactory | None
) -> tuple[Any, str, int]:
    """Apply a proposal file through the same validation, checks and history."""
    try:
        raw = json.loads(Path(args.file).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read the proposal {args.file}: {exc}") from None
    if not isinstance(raw, dict):
        raise CliError(f"{args.file}: a proposal is a JSON object with an `edits` list")
    scope = args.scope or ("project" if repo else "local" if args.session else "global")
    store = _stores(home, args.session, scope, repo)[0]
    cwd = Path(repo) if repo else Path.cwd()
    verifier: PreApplyVerifier
    if args.no_verify:
        verifier = _note_verifier("not verified: --no-verify")
    elif verifier_factory is not None:
        verifier = verifier_factory(scope, cwd)
    else:
        verifier = _note_verifier("not verified: no skill checker in this process")
    result = store.apply(raw, scope=scope, trigger="cli", session_id=args.session, verifier=verifier)
    refused = [e for e in result.applied_edits if not e.applied]
    return result, _result_text(result), 1 if refused else 0


def _curate(
    args: argparse.Namespace, home: Path, repo: str | None, standing_factory: StandingFactory | None
) -> tuple[Any, str, int]:
    store = _stores(home, args.session, args.scope, repo)[0]
    standing = standing_factory(home) if standing_factory is not None else None
    plan = plan_curation(store.load(), standing=standing)
    if not args.apply:
        hint = "\n(dry run: nothing changed; --apply applies it)" if plan.actions else ""
        return {"dry_run": True, **plan.to_json()}, plan.report() + hint, 0
    if not plan.actions:
        return {"dry_run": False, **plan.to_json()}, plan.report(), 0
    result = store.curate(plan, trigger="cli")
    text = (
        f"{plan.report()}\n{_result_text(result)}\nUndo the pass: continual-acp harness rollback {result.id}"
    )
    return {"dry_run": False, **plan.to_json(), "refinement": result}, text, 0 if result.applied else 1


def _note_verifier(note: str) -> PreApplyVerifier:
    def verify(entry: HarnessEntry) -> Verdict:
        return Verdict(True, note)

    return verify


def main(
    argv: Sequence[str],
    *,
    verifier_factory: VerifierFactory | None = None,
    standing_factory: StandingFactory | None = None,
) -> int:
    """Run one harness command; returns the exit code. `verifier_factory` checks imported skills;
    `standing_factory` gives `curate` the entries' standing."""
    argv = list(argv)
    as_json = "--json" in argv
    argv = [a for a in argv if a != "--json"]
    try:
        if not argv:
            raise CliError("a command is needed\n" + _parser().format_usage().strip())
        args = _parser().parse_args(argv)
        if args.command in ("ui", "sessions"):
            raise CliError(
                f"`{args.command}` runs through the `continual-acp harness {args.command}` command"
            )
        payload, text, code = _run(args, data_home(), as_json, verifier_factory, standing_factory)
    except (CliError, HarnessStoreError, RefinementNotFound, ValueError) as exc:
        message = exc.args[0] if isinstance(exc, RefinementNotFound) and exc.args else str(exc)
        print(f"continual-acp harness: error: {message}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(_dump(payload), indent=2, ensure_ascii=False))
    else:
        print(text)
    if code != 0 and not as_json:
        print(
            f"continual-acp harness: {args.command} {getattr(args, 'id', '')} did not fully apply",
            file=sys.stderr,
        )
    return code
