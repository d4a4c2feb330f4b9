"""Write tests/file_durations.json from a JUnit XML report (`pytest --junitxml=report.xml`).

    python tests/update_file_durations.py report.xml

The seconds each test file took (setup, calls and teardown of its tests) order the files for the
parallel workers (tests/conftest.py): the longest go first, so no long file starts last. Stale or
missing figures only change that order, never what runs; regenerate after a file grows a lot.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(__file__).resolve().parent / "file_durations.json"


def file_of(classname: str) -> str | None:
    """`tests.acp_server.test_x.TestY` -> `tests/acp_server/test_x.py` (the longest prefix that is a file)."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        candidate = Path(*parts[:end]).with_suffix(".py")
        if (ROOT / candidate).is_file():
            return candidate.as_posix()
    return None


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write(__doc__ or "")
        return 2
    seconds: Counter[str] = Counter()
    for case in ET.parse(argv[1]).iter("testcase"):
        path = file_of(case.get("classname", ""))
        if path is not None:
            seconds[path] += float(case.get("time") or 0.0)
    ordered = {path: round(value, 1) for path, value in sorted(seconds.items())}
    OUT.write_text(json.dumps(ordered, indent=1) + "\n", encoding="utf-8")
    print(f"{len(ordered)} files, {sum(ordered.values()):.0f} s in all -> {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
