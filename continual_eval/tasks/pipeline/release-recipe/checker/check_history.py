import sys
from pathlib import Path

# A release adds to the history; it never rewrites what earlier releases left.
log = Path("CHANGELOG.md").read_text()
releases = Path("RELEASES").read_text().split()
if "## 1.2.0\n\n- Faster start." not in log:
    sys.exit("CHANGELOG.md lost the 1.2.0 entry")
if releases[:2] != ["1.1.0", "1.2.0"]:
    sys.exit(f"RELEASES lost earlier releases: {releases}")
print("history kept")
