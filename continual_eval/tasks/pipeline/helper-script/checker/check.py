import subprocess
import sys
from pathlib import Path

if subprocess.call([sys.executable, "tools/migrate.py", "--check"]) != 0:
    sys.exit(1)
found = [p for p in Path("migrations").glob("*add_email.sql") if "ADD COLUMN email" in p.read_text()]
sys.exit(0 if found else "no add_email migration")
