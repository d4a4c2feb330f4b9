import subprocess
import sys
import tomllib
from pathlib import Path

spec = tomllib.loads(Path("api.toml").read_text())
if spec.get("endpoints", {}).get("status", {}).get("path") != "/status":
    sys.exit("api.toml has no status endpoint at /status")
by_hand = Path("src/api.py").read_text()
subprocess.run([sys.executable, "gen.py"], check=True, capture_output=True)
sys.exit(
    0
    if by_hand == Path("src/api.py").read_text()
    else "src/api.py was edited by hand (it differs from gen.py's output)"
)
