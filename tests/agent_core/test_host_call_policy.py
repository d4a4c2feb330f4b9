"""The host-call policy: what a kernel-to-server call (editor.read / editor.write) may touch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_core.editor_ops import judge, read_judged, write_judged
from agent_core.trust.host_call_policy import PolicyInputs, build_context, decide, resolve_target


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / ".continual-acp").mkdir(parents=True)
    (ws / ".continual-acp" / "gates.toml").write_text("[[gate]]\ncommand = 'pytest'\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "src").mkdir()
    (ws / "tests").mkdir()
    (tmp_path / "home" / "sessions").mkdir(parents=True)
    return ws


def _inputs(ws: Path, **kw: object) -> PolicyInputs:
    base: dict[str, object] = {
        "cwd": str(ws),
        "home": str(ws.parent / "home"),
        "config_file": str(ws.parent / "config.toml"),
        "protected": ("tests",),
        "backend": "local",
    }
    base.update(kw)
    return PolicyInputs(**base)  # type: ignore[arg-type]


def _allowed(ws: Path, access: str, path: str, **kw: object) -> bool:
    target = resolve_target(path, str(ws))
    return decide("editor.write", access, target, build_context(_inputs(ws, **kw))).allowed  # type: ignore[arg-type]


def _reason(ws: Path, access: str, path: str, **kw: object) -> str:
    target = resolve_target(path, str(ws))
    return decide("editor.write", access, target, build_context(_inputs(ws, **kw))).reason  # type: ignore[arg-type]


def test_an_ordinary_workspace_file_may_be_written_and_read(workspace: Path) -> None:
    assert _allowed(workspace, "write", "src/app.py")
    assert _allowed(workspace, "read", "src/app.py")
    assert _allowed(workspace, "read", ".continual-acp/gates.toml")  # reading the gates is fine


def test_the_control_plane_is_refused_to_writes_with_the_reason(workspace: Path) -> None:
    reason = _reason(workspace, "write", ".continual-acp/gates.toml")
    assert reason.startswith("editor.write: .continual-acp/gates.toml is in .continual-acp/")
    assert "harness.*" in reason


def test_a_symlink_into_the_control_plane_is_refused(workspace: Path) -> None:
    (workspace / "src" / "innocent.toml").symlink_to(workspace / ".continual-acp" / "gates.toml")
    (workspace / "plane").symlink_to(workspace / ".continual-acp")
    assert not _allowed(workspace, "write", "src/innocent.toml")
    assert not _allowed(workspace, "write", "plane/harness/entries/prompt/x.md")


def test_a_control_plane_that_is_itself_a_symlink_is_refused_where_it_points(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    real_plane = ws / "config-store"
    real_plane.mkdir(parents=True)
    (ws / ".continual-acp").symlink_to(real_plane)
    assert not _allowed(ws, "write", "config-store/gates.toml")


def test_dot_dot_traversal_into_refused_areas_is_refused(workspace: Path) -> None:
    assert not _allowed(workspace, "write", "src/../.continual-acp/gates.toml")
    assert not _allowed(workspace, "write", "src/../../home/sessions/x/transcript.jsonl")
    assert not _allowed(workspace, "read", f"{workspace}/src/../../home/sessions/x/transcript.jsonl")


def test_a_dot_git_file_pointing_elsewhere_refuses_the_git_dir_it_names(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    elsewhere = tmp_path / "store" / "repo-data"
    elsewhere.mkdir(parents=True)
    (ws / ".git").write_text(f"gitdir: {elsewhere}\n")
    assert not _allowed(ws, "write", str(elsewhere / "config"))  # local backend: outside is allowed...
    assert _allowed(ws, "write", str(tmp_path / "store" / "notes.txt"))  # ...but not the git dir
    assert not _allowed(ws, "write", ".git")


def test_a_nested_dot_git_file_refuses_its_git_dir(workspace: Path, tmp_path: Path) -> None:
    """A submodule's git dir out of the tree: refused by what it is (HEAD, objects, refs), found
    from the path written, and by the `.git` file that names it, found from a path beside it."""
    module_dir = tmp_path / "modules" / "sub"
    for folder in ("objects", "refs", "hooks"):
        (module_dir / folder).mkdir(parents=True)
    (module_dir / "HEAD").write_text("ref: refs/heads/main\n")
    (workspace / "sub").mkdir()
    (workspace / "sub" / ".git").write_text("gitdir: ../../modules/sub\n")
    target = resolve_target(str(module_dir / "hooks" / "pre-commit"), str(workspace))
    assert target.git_dirs == (str(module_dir),)
    assert not _allowed(workspace, "write", str(module_dir / "hooks" / "pre-commit"))
    sub_target = resolve_target("sub/file.txt", str(workspace))
    assert str(module_dir) in sub_target.git_dirs


def test_refusals_ignore_case(workspace: Path) -> None:
    assert not _allowed(workspace, "write", ".GIT/config")
    assert not _allowed(workspace, "write", ".Continual-ACP/gates.toml")
    assert not _allowed(workspace, "write", "TESTS/test_x.py")


def test_protected_paths_are_refused_to_writes_not_reads(workspace: Path) -> None:
    assert "protected path" in _reason(workspace, "write", "tests/test_calc.py")
    assert _allowed(workspace, "read", "tests/test_calc.py")


def test_the_data_dir_config_and_proc_are_refused_even_to_reads(workspace: Path, tmp_path: Path) -> None:
    assert not _allowed(workspace, "read", str(tmp_path / "home" / "sessions" / "a" / "transcript.jsonl"))
    assert not _allowed(workspace, "read", str(tmp_path / "config.toml"))
    assert not _allowed(workspace, "read", f"/proc/{os.getpid()}/environ")
    assert not _allowed(workspace, "read", "/proc/self/environ")
    assert not _allowed(workspace, "read", "/dev/stdin")
    (workspace / "src" / "env").symlink_to(f"/proc/{os.getpid()}/environ")
    assert not _allowed(workspace, "read", "src/env")


def test_outside_the_workspace_a_call_does_what_the_backend_lets_the_kernel_do(
    workspace: Path, tmp_path: Path
) -> None:
    outside = str(tmp_path / "elsewhere.txt")
    assert _allowed(workspace, "write", outside)  # local: the kernel could write it itself
    assert not _allowed(workspace, "write", outside, backend="sandbox", confined=True, tier="landlock")
    assert _allowed(workspace, "read", "/etc/hostname", backend="sandbox", confined=True, tier="landlock")
    assert not _allowed(workspace, "read", outside, backend="sandbox", confined=True, tier="bubblewrap")
    assert not _allowed(workspace, "read", "/etc/hostname", backend="gateway")
    assert _allowed(workspace, "write", "src/x.py", backend="gateway")
    # A runtime dir named by the session is refused whatever the backend.
    runtime = tmp_path / "runtime"
    assert not _allowed(workspace, "read", str(runtime / "kernel.json"), runtime_dirs=(str(runtime),))


def test_judge_raises_a_permission_error_naming_the_op_and_path(workspace: Path) -> None:
    with pytest.raises(PermissionError, match=r"^editor\.write: \.continual-acp/gates\.toml is in"):
        judge("editor.write", "write", ".continual-acp/gates.toml", _inputs(workspace))


def test_a_directory_swapped_for_a_symlink_after_the_check_is_not_followed(workspace: Path) -> None:
    (workspace / "src" / "pkg").mkdir()
    target = judge("editor.write", "write", "src/pkg/gates.toml", _inputs(workspace))
    (workspace / "src" / "pkg").rmdir()
    (workspace / "src" / "pkg").symlink_to(workspace / ".continual-acp")
    before = (workspace / ".continual-acp" / "gates.toml").read_text()
    with pytest.raises(OSError):
        write_judged(target, "[[gate]]\ncommand = 'true'\n")
    assert (workspace / ".continual-acp" / "gates.toml").read_text() == before


def test_a_fifo_is_refused_without_blocking(workspace: Path) -> None:
    os.mkfifo(workspace / "src" / "pipe")
    target = judge("editor.read", "read", "src/pipe", _inputs(workspace))
    with pytest.raises(OSError, match="not a regular file"):
        read_judged(target)
    with pytest.raises(OSError):
        write_judged(target, "x")


def test_write_then_read_round_trips_and_creates_folders(workspace: Path) -> None:
    target = judge("editor.write", "write", "src/new/deep/file.txt", _inputs(workspace))
    write_judged(target, "héllo\r\nworld\n")
    assert (workspace / "src" / "new" / "deep" / "file.txt").read_bytes() == "héllo\r\nworld\n".encode()
    assert read_judged(target) == "héllo\nworld\n"
    write_judged(target, "short")
    assert read_judged(target) == "short"


def test_other_servers_runtime_dirs_are_found_by_their_owner_file(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    (tmp_path / "cacp-abc").mkdir()
    (tmp_path / "cacp-abc" / "owner").write_text("1 -\n")
    (tmp_path / "cacp-bridge-x").mkdir()
    (tmp_path / "cacp-project").mkdir()  # a user's folder with the same prefix
    assert not _allowed(workspace, "read", str(tmp_path / "cacp-abc" / "sbx-1" / "kernel.json"))
    assert not _allowed(workspace, "read", str(tmp_path / "cacp-bridge-x" / "bridge.sock"))
    assert _allowed(workspace, "read", str(tmp_path / "cacp-project" / "notes.txt"))


def test_a_dot_git_swapped_for_a_fifo_does_not_hang_the_policy(tmp_path: Path) -> None:
    """A `.git` that turns into a FIFO between the check and the read is read without blocking."""
    import threading

    from agent_core.trust.host_call_policy import _gitdir_of

    fifo = tmp_path / ".git"
    os.mkfifo(fifo)
    found: list[tuple[str, ...]] = []
    reader = threading.Thread(target=lambda: found.append(_gitdir_of(str(fifo))), daemon=True)
    reader.start()
    reader.join(timeout=10)
    blocked = reader.is_alive()
    if blocked:  # unblock the reader before failing
        with open(fifo, "wb"):
            pass
    assert not blocked
    assert found == [()]
