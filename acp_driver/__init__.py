"""An ACP client: drives an agent (a child process) over newline-delimited JSON-RPC on its stdio.

Standard library only, and no other package of the project: the eval uses it to drive the server
without importing it.
"""

from acp_driver.aio import AsyncClient, ClientError
from acp_driver.core import AgentRequest, ClientCore, Incoming, Notification, Response
from acp_driver.framing import LINE_LIMIT, BadLine, LineDecoder
from acp_driver.policy import AgentRequestError, ClientPolicy, allow_once, select
from acp_driver.threaded import RpcError, StreamClosed, ThreadClient

__all__ = [
    "LINE_LIMIT",
    "AgentRequest",
    "AgentRequestError",
    "AsyncClient",
    "BadLine",
    "ClientCore",
    "ClientError",
    "ClientPolicy",
    "Incoming",
    "LineDecoder",
    "Notification",
    "Response",
    "RpcError",
    "StreamClosed",
    "ThreadClient",
    "allow_once",
    "select",
]
