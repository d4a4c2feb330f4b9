import subprocess
import sys
from pathlib import Path

covered = any("Hello World" in p.read_text() for p in Path("checks").glob("check_*.py"))
if not covered:
    sys.exit("no check in checks/check_*.py covers slugify('Hello World')")
out = subprocess.run([sys.executable, "run_checks.py"], capture_output=True, text=True)
print(out.stdout)
if out.returncode != 0:
    sys.exit(out.returncode)
sys.exit(0 if int(out.stdout.split()[0]) >= 2 else "too few checks ran")
