import hashlib
import subprocess
import sys


def git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout


def expect() -> None:
    text = git("show", "HEAD:README.md")
    assert "recieve" not in text and "receive" in text, "README.md still has the typo"


problems = []
count = int(git("rev-list", "--count", "HEAD").strip())
if count != 2:
    problems.append(f"expected one commit on top of the initial one, found {count - 1}")
subject = git("log", "-1", "--format=%s").strip()
body = git("log", "-1", "--format=%b")
tree = git("log", "-1", "--format=%T").strip()
want = "I" + hashlib.sha1(f"{tree}\n{subject}".encode()).hexdigest()[:16]
if f"Change-Id: {want}" not in body:
    problems.append("the commit has no valid Change-Id trailer")
if git("status", "--porcelain").strip():
    problems.append("uncommitted changes left: " + git("status", "--porcelain").strip())
try:
    expect()
except AssertionError as exc:
    problems.append(f"the change is not right: {exc}")
print("\n".join(problems) or "committed")
sys.exit(1 if problems else 0)
