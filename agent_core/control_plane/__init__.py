"""The control plane (`.continual-acp/`: gates, the project harness) is the server's, not a cell's.

See the package README: the guard on unconfined backends, by content (`guard.py`; `tree_watch.py`
says where to look, `contents.py` reads, `scan.py` walks), the held change a review decides
(`held.py`), the settings (`settings.py`) and the tamper evidence of an autonomous loop (`tamper.py`).
"""
