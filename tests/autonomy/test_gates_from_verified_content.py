"""A loop's project gates come from what the control-plane guard verified, not the disk at use time."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from agent_core.autonomy.controller import SessionAutonomy
from agent_core.control_plane.guard import ControlPlaneGuard


def _autonomy_over(cwd: Path, guard: ControlPlaneGuard | None) -> SimpleNamespace:
    """The parts of a SessionAutonomy that `gates()` reads, around a real guard."""
    fake = SimpleNamespace(
        session=SimpleNamespace(cwd=str(cwd), control_plane=guard),
        settings=SimpleNamespace(user_gates=()),
        _state=SimpleNamespace(gates=()),
    )
    fake._verified_gate_file = lambda: SessionAutonomy._verified_gate_file(fake)  # type: ignore[arg-type]
    return fake


def test_a_gate_file_rewritten_after_the_guards_check_is_not_what_the_loop_reads(tmp_path: Path) -> None:
    control = tmp_path / ".continual-acp"
    control.mkdir()
    gates = control / "gates.toml"
    gates.write_text('[[gate]]\ncommand = "python3 -m pytest -q"\n')
    guard = ControlPlaneGuard([control])
    try:
        guard.refresh()  # the prompt start: this content is verified
        gates.write_text('[[gate]]\ncommand = "true"\n')  # lands after the check, before the pin
        commands = [g.command for g in SessionAutonomy.gates(_autonomy_over(tmp_path, guard))]  # type: ignore[arg-type]
        assert commands == ["python3 -m pytest -q"]
        # Without a guard (no kernel yet), the disk is all there is.
        plain = [g.command for g in SessionAutonomy.gates(_autonomy_over(tmp_path, None))]  # type: ignore[arg-type]
        assert plain == ["true"]
    finally:
        guard.close()
