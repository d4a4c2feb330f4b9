"""The first model request imports `openai` in a worker thread: on the event loop that import (0.3-1 s
of CPU) stalled every session and the reading of stdin (found by benchmarks/bench_suite_stalls.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

# In a fresh interpreter (this one has imported openai already): a meta-path finder notes the thread
# that first asks for `openai`, then a model request is made on a running loop.
PROBE = textwrap.dedent(
    """
    import asyncio, sys, threading

    asked = []

    class Spy:
        def find_spec(self, name, path=None, target=None):
            if name == "openai" and not asked:
                asked.append(threading.current_thread() is threading.main_thread())
            return None

    sys.meta_path.insert(0, Spy())
    from agent_core.config.loader import AgentConfig
    from agent_core.model import ModelClient

    async def main():
        client = ModelClient(AgentConfig(home=sys.argv[1], base_url="http://127.0.0.1:9/v1", model="m", api_key="k"))
        await client._openai()
        await client.aclose()

    asyncio.run(main())
    print("on-loop" if asked[0] else "in-thread")
    """
)


def test_the_first_model_request_imports_openai_off_the_event_loop(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "in-thread"
