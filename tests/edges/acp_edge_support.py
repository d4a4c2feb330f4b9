"""Shared by the edge tests: finding the processes a test started (by a marker in their environment)."""

from __future__ import annotations

from pathlib import Path


def processes_with_env(key: str, value: str) -> list[str]:
    """Command lines of live processes whose environment has `key=value` (children inherit it)."""
    needle = f"{key}={value}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if needle in (proc / "environ").read_bytes().split(b"\0"):
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found
