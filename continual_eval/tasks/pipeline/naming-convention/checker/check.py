import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Wrong slugify versions that the existing check misses: the new test must catch every one of them,
# so a check_*.py that mentions 'Hello World' but asserts nothing does not pass.
MUTANTS = [
    'def slugify(text: str) -> str:\n    return "_".join(text.lower().split())\n',
    "def slugify(text: str) -> str:\n    return text.lower()\n",
    'def slugify(text: str) -> str:\n    return "-".join(text.split())\n',
]

covered = any("Hello World" in p.read_text() for p in Path("checks").glob("check_*.py"))
if not covered:
    sys.exit("no check in checks/check_*.py covers slugify('Hello World')")
out = subprocess.run([sys.executable, "run_checks.py"], capture_output=True, text=True)
print(out.stdout)
if out.returncode != 0:
    sys.exit(out.returncode)
if int(out.stdout.split()[0]) < 2:
    sys.exit("too few checks ran")
for mutant in MUTANTS:
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "repo"
        shutil.copytree(".", copy, ignore=shutil.ignore_patterns(".git"))
        (copy / "src" / "slug.py").write_text(mutant)
        run = subprocess.run([sys.executable, "run_checks.py"], cwd=copy, capture_output=True, text=True)
        if run.returncode == 0:
            sys.exit(f"the checks pass a wrong slugify too (they check nothing new):\n{mutant}")
print("every wrong slugify is caught")
