"""`python -m benchmarks [names...] [--render] [--list] [--extra ARGS]`: run the suite (or the named benchmarks),
append each run to `benchmarks/results/<name>.json`, regenerate `benchmarks/RESULTS.md`."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the scripts import `figures` by name

from suite import BENCHMARKS, BY_NAME, RESULTS_MD, append_run, render_results, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: the suite)")
    parser.add_argument("--render", action="store_true", help="only regenerate RESULTS.md")
    parser.add_argument("--list", action="store_true", help="list the benchmarks")
    parser.add_argument(
        "--extra",
        default="",
        help="arguments appended to one named benchmark's own (a quicker run on a loaded machine); "
        "they are recorded in the run's command",
    )
    args = parser.parse_args(argv)
    if args.list:
        for bench in BENCHMARKS:
            where = "suite" if bench.reports and bench.in_suite else "alone" if not bench.reports else "named"
            print(f"{bench.name:<14} {where:<6} {bench.command}")
        return 0
    if not args.render:
        unknown = [n for n in args.names if n not in BY_NAME]
        if unknown:
            parser.error(f"unknown benchmark(s) {', '.join(unknown)}; --list shows them")
        if args.extra and len(args.names) != 1:
            parser.error("--extra needs exactly one benchmark named")
        chosen = [BY_NAME[n] for n in args.names] or [b for b in BENCHMARKS if b.reports and b.in_suite]
        for bench in chosen:
            print(f"== {bench.name}: {bench.command}", file=sys.stderr)
            append_run(bench, run(bench, shlex.split(args.extra)))
    RESULTS_MD.write_text(render_results(), encoding="utf-8")
    print(f"wrote {RESULTS_MD}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
