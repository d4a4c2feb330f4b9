import sys
from pathlib import Path

text = Path("selftest.txt").read_text() if Path("selftest.txt").is_file() else ""
sys.exit(0 if text.strip() == "selftest: 3 checks ok" else f"selftest.txt holds {text!r}")
