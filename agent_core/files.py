"""The one atomic private write and the one private directory (harness_store's), for acp_server,
which may not import harness_store."""

from __future__ import annotations

from harness_store.private_files import private_dir, write_atomic

__all__ = ["private_dir", "write_atomic"]
