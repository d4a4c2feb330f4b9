"""The review panel: the continual harness, its history and its rollbacks in a local web page.

`continual-acp harness ui` serves it (run.py); `ensure_panel(home)` starts it inside a running
server process for `/harness ui`. aiohttp is imported only when a panel starts (app.py, run.py), so
importing this package costs nothing on the ACP server's startup path.
"""

from __future__ import annotations
