import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, "src")
MODULE, OLD_TEST = "calc", "def test_add"


def check() -> None:
    from calc import add, mul

    assert mul(3, 4) == 12 and mul(-2, 5) == -10, "mul"
    assert add(2, 3) == 5, "add changed"


problems = []
text = Path("CHANGES.md").read_text() if Path("CHANGES.md").is_file() else ""
headings = [m.start() for m in re.finditer(r"(?m)^## ", text)]
if not headings or not text[headings[0] :].startswith("## Unreleased\n"):
    problems.append("CHANGES.md does not start its sections with ## Unreleased")
else:
    section = text[headings[0] : headings[1] if len(headings) > 1 else len(text)]
    if not re.search(rf"(?m)^- {MODULE}: \S", section):
        problems.append(f"no `- {MODULE}: ...` entry under ## Unreleased")
if OLD_TEST not in Path(f"tests/test_{MODULE}.py").read_text():
    problems.append(f"tests/test_{MODULE}.py lost {OLD_TEST}")
try:
    check()
except Exception as exc:  # the new function is missing or wrong, or the old one broke
    problems.append(f"behaviour: {exc!r}")
run = subprocess.run(["./run-tests"], capture_output=True, text=True)
if run.returncode != 0:
    problems.append("the tests fail:\n" + run.stdout[-2000:])
print("\n".join(problems) or "ok")
sys.exit(1 if problems else 0)
