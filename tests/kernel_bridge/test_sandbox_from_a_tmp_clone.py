"""The sandbox starts wherever Python lives: its tests pass from a clone with its virtualenv under /tmp.

The bubblewrap tier gives the kernel a private /tmp, which used to hide an interpreter living there
(`bwrap: execvp /tmp/.../.venv/bin/python: No such file or directory`). The clone is this
repository's committed tree; its virtualenv reuses the installed packages (a path file naming this
interpreter's site-packages), so the test costs a clone, a venv without pip and the sandbox tests.
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
import tempfile
from pathlib import Path

from system_deps import requires

from kernel_bridge.sandbox import probe_bubblewrap

ROOT = Path(__file__).resolve().parents[2]
_BWRAP = probe_bubblewrap()


@requires(_BWRAP.ok, f"bubblewrap tier unavailable: {_BWRAP.reason}")
def test_the_bubblewrap_sandbox_tests_pass_from_a_clone_and_a_venv_under_tmp() -> None:
    with tempfile.TemporaryDirectory(prefix="cacp-clone-", dir="/tmp") as raw:
        clone = Path(raw) / "repo"
        subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{ROOT}", str(clone)], check=True)
        base = os.path.join(sys.base_prefix, "bin", os.path.basename(sys.executable))
        if not os.path.exists(base):
            base = sys.executable
        subprocess.run([base, "-m", "venv", "--without-pip", str(clone / ".venv")], check=True)
        python = clone / ".venv" / "bin" / "python"
        inner = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        # The installed packages, after the clone's own code (the clone is the cwd, first on sys.path).
        Path(inner, "reuse-installed.pth").write_text("\n".join(site.getsitepackages()) + "\n")
        done = subprocess.run(
            [
                str(python),
                "-m",
                "pytest",
                "-q",
                "-n",
                "0",
                "-p",
                "no:cacheprovider",
                "-rs",
                "tests/kernel_bridge/test_sandbox.py",
                "-k",
                "sandbox_cell_can_write_in_the_workspace or sandbox_cell_cannot_write_the_control_plane "
                "or sandbox_interrupt_stops",
            ],
            cwd=clone,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )
        assert (
            str(python.parent.parent)
            in subprocess.run(
                [str(python), "-c", "import sys; print(sys.prefix)"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
        assert "3 passed" in done.stdout and "skipped" not in done.stdout, done.stdout[-2000:]
