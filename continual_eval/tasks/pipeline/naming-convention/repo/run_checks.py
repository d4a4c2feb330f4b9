"""The project's test runner: imports checks/check_*.py and calls every check_* function."""

import importlib.util
import sys
from pathlib import Path

sys.path.insert(0, "src")
ran = failed = 0
for path in sorted(Path("checks").glob("check_*.py")):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in sorted(dir(module)):
        if name.startswith("check_"):
            ran += 1
            try:
                getattr(module, name)()
            except AssertionError:
                failed += 1
                print(f"FAIL {path}::{name}")
print(f"{ran} checks, {failed} failed (only checks/check_*.py files are collected)")
sys.exit(1 if failed else 0)
