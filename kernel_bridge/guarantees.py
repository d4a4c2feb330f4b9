"""What a kernel backend guarantees: where kernels run, how they are confined, whether they have network.

Every launcher may carry a `guarantees` attribute of this type; `KernelPool.guarantees` reports it
(the local launcher's when it has none), for `doctor`, `/kernel status` and the session's `_meta`
(acp_server's `frames.kernel_guarantees` is the wire shape).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class KernelGuarantees:
    """The guarantees in force for kernels of one backend."""

    backend: str  # "local", "sandbox", "gateway", "provisioner"
    where: str = "a local process on this machine"
    confined: bool = False  # writes limited to the workspace, .git/harness/data dir protected
    tier: str | None = None  # the sandbox tier in force ("bubblewrap", ...), None when unconfined
    network: bool = True  # the kernel can open network connections
    # The sandbox was asked for but no tier works here: every cell must be approved (ask mode),
    # never run silently unconfined. agent_core acts on this flag.
    approval_required: bool = False
    notes: tuple[str, ...] = field(default=())

    def describe(self) -> str:
        """One line for `/kernel status` and `doctor`."""
        parts = [f"backend {self.backend}: {self.where}"]
        if self.backend == "sandbox":
            if self.confined:
                parts.append(f"sandboxed by {self.tier} (writes only in the workspace and temp dirs)")
            else:
                parts.append("NOT sandboxed: every cell needs approval")
        parts.append("network allowed" if self.network else "no network")
        parts.extend(self.notes)
        return "; ".join(parts)


LOCAL = KernelGuarantees("local", notes=("unconfined: the kernel can do what this user can",))
