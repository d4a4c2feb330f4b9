import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# The file must be what a real run of the tool makes from the data (run here in a scratch copy).
TOOL, OUT = "tools/index", "INDEX.txt"
got = Path(OUT).read_text() if Path(OUT).is_file() else None
with tempfile.TemporaryDirectory() as scratch:
    copy = Path(scratch) / "repo"
    shutil.copytree(".", copy, ignore=shutil.ignore_patterns(".git", OUT))
    env = dict(os.environ, LC_ALL="C")
    subprocess.run([sys.executable, TOOL], cwd=copy, env=env, check=True, capture_output=True)
    want = (copy / OUT).read_text()
sys.exit(0 if got == want else f"{OUT} is {got!r}, a real run of {TOOL} makes {want!r}")
