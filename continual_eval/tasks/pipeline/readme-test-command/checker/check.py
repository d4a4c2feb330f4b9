import subprocess
import sys
from pathlib import Path

sys.path.insert(0, "src")
from calc import add

if add(-2, 3) != 1 or add(2, 3) != 5:
    sys.exit("add is still wrong")
if not Path(".tests-ran").is_file():
    sys.exit("the tests were not run with the project's runner (./run-tests --fast)")
sys.exit(subprocess.call(["./run-tests", "--fast"]))
