import hashlib
import sys
from pathlib import Path

VERSION, FILE, OLD = "0.9.0", Path("pyproject.toml"), ["0.8.0", "0.8.1"]


def read_version() -> str:
    import tomllib

    return str(tomllib.loads(FILE.read_text())["project"]["version"])


problems = []
if read_version() != VERSION:
    problems.append(f"{FILE} does not say {VERSION}")
releases = Path("RELEASES").read_text().split()
if releases != [*OLD, VERSION]:
    problems.append(f"RELEASES is {releases}, expected {[*OLD, VERSION]}")
sig = Path(f".signatures/{VERSION}.sig")
expected = hashlib.sha256(f"ship:{VERSION}:{FILE.read_text()}".encode()).hexdigest()
if not sig.is_file() or sig.read_text().strip() != expected:
    problems.append(f"release {VERSION} is not signed")
print("\n".join(problems) or f"released {VERSION}, signed")
sys.exit(1 if problems else 0)
