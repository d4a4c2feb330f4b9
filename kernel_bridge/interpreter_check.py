"""Whether an interpreter can run a kernel (`check_ipykernel`), asked through the launch seam.

Its own module, above both `environment` and `workspace_launch`: the check uses the seam, and the
seam uses `environment`'s scrubbing, so neither of those imports the other.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
from pathlib import Path

from kernel_bridge.environment import resolve_interpreter
from kernel_bridge.errors import KernelStartError

__all__ = ["check_ipykernel"]

_HAS_IPYKERNEL = "import importlib.util, sys; sys.exit(importlib.util.find_spec('ipykernel') is None)"


async def check_ipykernel(python: Path, timeout: float = 20.0) -> None:
    """Raise `KernelStartError` (or `InterpreterNotFound`) when `python` cannot run a kernel.

    Cheap on purpose (it sits on the `session/new` path): this server's own interpreter is asked
    in-process; another one is asked once whether `ipykernel` is importable, without importing it.
    """
    resolve_interpreter(python)  # the file may have gone since the pool was built
    if python == Path(sys.executable):
        missing = importlib.util.find_spec("ipykernel") is None
    else:
        # Through the launch seam: the interpreter may be the workspace's own (`.venv/bin/python`),
        # which a cell can replace; it must not run with the server's capabilities. (Imported here:
        # the server's own interpreter, the usual case, never loads the seam for this check.)
        from kernel_bridge import workspace_launch

        launch = workspace_launch.LaunchPolicy(os.getcwd(), workspace_launch.workspace_environment())
        try:
            async with workspace_launch.start(
                [str(python), "-c", _HAS_IPYKERNEL], launch, stdout=asyncio.subprocess.DEVNULL
            ) as process:
                try:
                    _, err = await asyncio.wait_for(process.communicate(), timeout)
                except TimeoutError as exc:
                    raise KernelStartError(
                        f"the kernel interpreter {python} did not answer within {timeout:g} s"
                    ) from exc
        except OSError as exc:
            raise KernelStartError(f"the kernel interpreter {python} could not be run: {exc}") from exc
        if process.returncode not in (0, 1):
            detail = err.decode(errors="replace").strip()[-300:]
            raise KernelStartError(f"the kernel interpreter {python} could not be run: {detail}")
        missing = process.returncode == 1
    if missing:
        raise KernelStartError(
            f"the kernel interpreter {python} has no ipykernel: install it there "
            f"(`{python} -m pip install ipykernel`) or set kernel_python to a Python that has it"
        )
