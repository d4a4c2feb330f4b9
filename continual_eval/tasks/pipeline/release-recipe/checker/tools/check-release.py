"""Checks a release: steps: VERSION, CHANGELOG.md heading, RELEASES line (see docs/RELEASING.md)."""

import sys
from pathlib import Path

version = sys.argv[1]
missing = []
if Path("VERSION").read_text().strip() != version:
    missing.append("VERSION")
headings = [line for line in Path("CHANGELOG.md").read_text().splitlines() if line.startswith("## ")]
if not headings or headings[0] != f"## {version}":
    missing.append("CHANGELOG.md heading")
if version not in Path("RELEASES").read_text().split():
    missing.append("RELEASES line")
if missing:
    print(f"release {version} incomplete, missing: {', '.join(missing)}")
    print("steps: VERSION, CHANGELOG.md heading, RELEASES line")
    sys.exit(1)
print(f"release {version} ok")
