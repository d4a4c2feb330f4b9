"""A record of the remote kernels this user's servers started, so none outlives its server.

A server that is SIGKILLed (or crashes) cannot delete its gateway kernels or end the kernels a
remote provisioner started for it. Each kernel it starts is written here with its owner (host,
pid and the process's start time, so a reused pid is not taken for the owner); the next server
start deletes the kernels whose owner is gone. Kernels of servers that still run are left alone.
One JSON file, read-modify-written under `flock`. An entry may carry `info`: what a later process
needs to end the kernel (a provisioner's persisted state).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from host_base.private_files import write_atomic
from host_base.process_identity import pid_exists, start_time

log = logging.getLogger(__name__)


def owner_tag(pid: int | None = None) -> str:
    """This server's identity: `host:pid:start`."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{start_time(pid) or ''}"


def owner_alive(tag: str) -> bool:
    """True unless `tag` names a process on this host that is gone (other hosts: assumed alive)."""
    host, _, rest = tag.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return True
    pid = int(pid_text)
    if not pid_exists(pid):
        return False
    return not start or start_time(pid) == start


class KernelLedger:
    """Entries `{gateway, kernel_id, owner, created[, info, attempts]}` in a 0600 JSON file.

    `gateway` is where the kernel lives (a gateway's URL, or `provisioner:<kernelspec>`).
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextlib.contextmanager
    def _locked(self) -> Iterator[list[dict[str, Any]]]:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock_fd = os.open(str(self.path) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            try:
                entries = json.loads(self.path.read_text(encoding="utf-8"))
                if not isinstance(entries, list):
                    entries = []
            except (OSError, ValueError):
                entries = []
            before = json.dumps(entries)
            yield entries
            if json.dumps(entries) != before:
                write_atomic(self.path, json.dumps(entries), sync=False)
        finally:
            os.close(lock_fd)

    def add(self, gateway: str, kernel_id: str, owner: str, info: dict[str, Any] | None = None) -> None:
        """Record a kernel this server started (`info`: JSON-able state needed to end it later)."""
        entry: dict[str, Any] = {
            "gateway": gateway,
            "kernel_id": kernel_id,
            "owner": owner,
            "created": time.time(),
        }
        if info is not None:
            entry["info"] = info
        with self._locked() as entries:
            entries.append(entry)

    def remove(self, gateway: str, kernel_id: str) -> None:
        """Forget a kernel (deleted by its owner)."""
        with self._locked() as entries:
            entries[:] = [
                e for e in entries if not (e.get("gateway") == gateway and e.get("kernel_id") == kernel_id)
            ]

    def orphans(self, gateway: str) -> list[str]:
        """Ids of kernels on `gateway` whose owning server is gone."""
        with self._locked() as entries:
            return [
                str(e.get("kernel_id"))
                for e in entries
                if e.get("gateway") == gateway and not owner_alive(str(e.get("owner", "")))
            ]

    def orphan_entries(self) -> list[dict[str, Any]]:
        """Every entry (all places, with its `info`) whose owning server is gone."""
        with self._locked() as entries:
            return [
                dict(e) for e in entries if isinstance(e, dict) and not owner_alive(str(e.get("owner", "")))
            ]

    def count_attempt(self, gateway: str, kernel_id: str) -> int:
        """Note one more failed attempt to end a left-over kernel; returns the count so far."""
        count = 0
        with self._locked() as entries:
            for e in entries:
                if e.get("gateway") == gateway and e.get("kernel_id") == kernel_id:
                    count = int(e.get("attempts", 0)) + 1
                    e["attempts"] = count
        return count

    def owned(self, gateway: str, owner: str) -> list[str]:
        """Ids of kernels on `gateway` recorded by `owner`."""
        with self._locked() as entries:
            return [
                str(e.get("kernel_id"))
                for e in entries
                if e.get("gateway") == gateway and e.get("owner") == owner
            ]
