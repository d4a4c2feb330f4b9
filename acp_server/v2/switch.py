"""Whether a connection speaks the v2 draft: the server's switch on and the client asking for it.

Read from the environment directly (the early `initialize` answer runs before the config table is
imported); the config table's `CONTINUAL_ACP_PROTOCOL` row refuses any value but `1` and `2`, so a
wrong value is named by the `-32012` configuration error every session request answers.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

ENV = "CONTINUAL_ACP_PROTOCOL"
V2 = 2


def switch_on(environ: Mapping[str, str] = os.environ) -> bool:
    """`CONTINUAL_ACP_PROTOCOL=2`: the server may speak the v2 draft (off by default). Exactly the
    text the config table accepts as 2 (no stripping): a value it refuses never turns v2 on."""
    return environ.get(ENV, "") == str(V2)


def speaks_v2(requested: object, environ: Mapping[str, str] = os.environ) -> bool:
    """The connection speaks v2: the switch is on and the client asked for version 2 (or later; v2
    is the latest this server speaks, which is what it answers then). Otherwise v1, unchanged."""
    return (
        switch_on(environ)
        and isinstance(requested, int)
        and not isinstance(requested, bool)
        and requested >= V2
    )
