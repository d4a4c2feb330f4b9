"""Create a numbered migration with its header and register it in migrations/INDEX."""

import sys
from pathlib import Path

name, sql = sys.argv[1], sys.argv[2]
index = Path("migrations/INDEX")
entries = [line for line in index.read_text().splitlines() if line.strip()]
number = f"{len(entries) + 1:03d}"
path = Path("migrations") / f"{number}_{name}.sql"
path.write_text(f"-- id: {number}\n{sql}\n")
index.write_text("\n".join([*entries, path.name]) + "\n")
print(f"created {path}")
