"""Start `llama_server.py` (llama-cpp-python's OpenAI-compatible server) and wait until it answers.

Shared by the benchmarks that talk to a local model (`bench_llama_cpp.py`, `bench_eval_local.py`).
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent


def start_llama(args: Sequence[str], port: int, log: Path, *, within: float) -> subprocess.Popen[bytes]:
    """`llama_server.py ARGS --host 127.0.0.1 --port PORT`, its stderr in `log`; returned once
    `/v1/models` answers. Exits the benchmark (SystemExit naming the log) if the server dies first or
    does not answer within `within` seconds."""
    argv = [sys.executable, str(HERE / "llama_server.py"), *args, "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the llama.cpp server exited ({proc.returncode}); see {log}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2).read()
            return proc
        except OSError:
            time.sleep(0.2)  # polling a server that is starting: there is nothing to wait on
    proc.kill()
    raise SystemExit(f"the llama.cpp server did not answer within {within:.0f} s; see {log}")
