import sys
from pathlib import Path

# What ./build writes from the sources (checked against the source, not a fixed line).
expected = "built from src\n" + Path("src/app.txt").read_text()
got = Path("dist/app.txt").read_text() if Path("dist/app.txt").is_file() else None
sys.exit(0 if got == expected else f"dist/app.txt holds {got!r}, ./build makes {expected!r}")
