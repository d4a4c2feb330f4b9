"""The control plane (`.continual-acp/`: gates, the project harness) is the server's, not a cell's.

See the package README: the per-cell guard on unconfined backends (`guard.py`, `scan.py`), the
held change a review decides (`held.py`), the settings (`settings.py`) and the tamper evidence of
an autonomous loop (`tamper.py`).
"""
