"""`harness_store.safe_read` for the skills, without importing the rest of harness_store.

The skills read skill folders with harness_store's safe reader (stdlib only), but importing
`harness_store.safe_read` runs `harness_store/__init__`, which loads pydantic: ~0.5 s in every
kernel and in the server's start-up thread. So the module is loaded from its file under its own
name; a kernel running another interpreter gets its source from the loader (skills/loader.py) and
finds it in `sys.modules` already.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

NAME = "harness_store.safe_read"


def safe_read() -> ModuleType:
    """The `harness_store.safe_read` module (imported from its file once per process)."""
    module = sys.modules.get(NAME)
    if module is not None:
        return module
    path = Path(__file__).resolve().parent.parent / "harness_store" / "safe_read.py"
    spec = importlib.util.spec_from_file_location(NAME, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {NAME} from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[NAME] = module
    spec.loader.exec_module(module)
    return module
