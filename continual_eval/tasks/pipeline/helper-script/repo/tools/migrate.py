"""Check that every migration is registered and carries its id header."""

import sys
from pathlib import Path

index = [line for line in Path("migrations/INDEX").read_text().splitlines() if line.strip()]
files = sorted(p.name for p in Path("migrations").glob("*.sql"))
bad = [f for f in files if f not in index or not Path("migrations", f).read_text().startswith("-- id: ")]
if bad:
    print(f"unregistered or headerless migrations: {', '.join(bad)}")
    print("create migrations with: python3 tools/new_migration.py NAME 'SQL'")
    sys.exit(1)
print(f"{len(files)} migrations ok")
