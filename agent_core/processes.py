"""Whether a process still runs, for the server's own files (the check itself is kernel_bridge's).

acp_server may not import kernel_bridge; this is its way to the one liveness check.
"""

from __future__ import annotations

from kernel_bridge.process_identity import pid_exists

__all__ = ["pid_exists"]
