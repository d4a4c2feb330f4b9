"""The ACP v2 draft, spoken only with `CONTINUAL_ACP_PROTOCOL=2` to a client that asks for version 2.

The v1 handlers stay the one implementation; this package reshapes what crosses the wire for a v2
connection (see README.md here): `switch.py` decides, `builders.py` builds the v2-only frames,
`reshape.py` maps v1 frames onto their v2 shapes, `dialect.py` is the per-connection state (each
session's foreground state and background list) the transport consults, and `lifecycle.py` turns
`session/prompt` into an acknowledgment followed by `state_update`s.
"""
