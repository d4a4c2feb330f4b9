"""Gate files the repository shapes are data: a FIFO or device never blocks, a huge file is refused."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from agent_core.autonomy.gates import GateConfigError, detect_gates, load_project_gates


def _in_time(call: object) -> list[object]:
    done, out = threading.Event(), []

    def run() -> None:
        try:
            out.append(call())  # type: ignore[operator]
        except BaseException as exc:
            out.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(10), "blocked on a hostile file"
    return out


def test_a_fifo_named_gates_toml_is_an_error_at_once(tmp_path: Path) -> None:
    (tmp_path / ".continual-acp").mkdir()
    os.mkfifo(tmp_path / ".continual-acp" / "gates.toml")
    [raised] = _in_time(lambda: load_project_gates(tmp_path))
    assert isinstance(raised, GateConfigError) and "a FIFO, not read" in str(raised)


def test_a_gates_file_linked_to_dev_zero_is_refused(tmp_path: Path) -> None:
    (tmp_path / ".continual-acp").mkdir()
    (tmp_path / ".continual-acp" / "gates.toml").symlink_to("/dev/zero")
    [raised] = _in_time(lambda: load_project_gates(tmp_path))
    assert isinstance(raised, GateConfigError)


def test_detection_skips_a_fifo_makefile_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "Makefile")
    [found] = _in_time(lambda: detect_gates(tmp_path))
    assert isinstance(found, list) and all("make" not in g.command for g in found)


@pytest.mark.parametrize("size", [300 * 1024])
def test_a_huge_gates_file_is_refused_before_it_is_read(tmp_path: Path, size: int) -> None:
    (tmp_path / ".continual-acp").mkdir()
    (tmp_path / ".continual-acp" / "gates.toml").write_text("#" * size)
    with pytest.raises(GateConfigError, match="over the"):
        load_project_gates(tmp_path)
