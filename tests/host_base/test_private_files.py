"""The one atomic private write and private directory (host_base.private_files)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

import pytest

from host_base.private_files import create_private, private_dir, write_atomic, write_atomic_with


class _DiskFull(OSError):
    pass


def test_a_write_that_fails_midway_leaves_the_old_file_whole_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    write_atomic(target, b"old contents")
    temps: list[str] = []

    def half_then_fail(handle: BinaryIO) -> None:
        handle.write(b"new con")
        handle.flush()
        temps.extend(p.name for p in tmp_path.iterdir() if p != target)  # the temp file exists now
        raise _DiskFull(28, "No space left on device")

    with pytest.raises(_DiskFull):
        write_atomic_with(target, half_then_fail)
    assert temps, "the writer ran before any temp file was created"
    assert target.read_bytes() == b"old contents"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_a_symlink_at_the_target_is_replaced_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("not yours")
    link = tmp_path / "config.toml"
    link.symlink_to(elsewhere)
    write_atomic(link, "key = 1\n")
    assert not link.is_symlink()
    assert link.read_text() == "key = 1\n"
    assert elsewhere.read_text() == "not yours"


def test_a_new_file_is_0600_even_under_a_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        write_atomic(tmp_path / "secret", "token")
        write_atomic(tmp_path / "unsynced", b"x", sync=False, sync_dir=True)
    finally:
        os.umask(old)
    for name in ("secret", "unsynced"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600


def test_mode_none_keeps_an_existing_files_mode_and_an_explicit_mode_wins(tmp_path: Path) -> None:
    kept, shared = tmp_path / "kept", tmp_path / "shared.md"
    kept.write_text("a")
    kept.chmod(0o640)
    write_atomic(kept, "b", mode=None)
    write_atomic(shared, "c", mode=0o644)
    assert (stat.S_IMODE(kept.stat().st_mode), kept.read_text()) == (0o640, "b")
    assert stat.S_IMODE(shared.stat().st_mode) == 0o644


def test_a_named_temp_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    temp = tmp_path / "out.tmp-1"
    temp.symlink_to(victim)
    with pytest.raises(OSError):
        write_atomic(tmp_path / "out", b"data", temp=temp)
    assert victim.read_text() == "keep"
    assert not (tmp_path / "out").exists()


def test_private_dir_makes_every_missing_parent_private(tmp_path: Path) -> None:
    leaf = private_dir(tmp_path / "sessions" / "s1" / "cells")
    for directory in (tmp_path / "sessions", tmp_path / "sessions" / "s1", leaf):
        assert directory.stat().st_mode & 0o777 == 0o700, directory
    assert private_dir(leaf) == leaf  # existing: fine


def test_private_dir_makes_an_existing_dir_0700_unless_told_not_to(tmp_path: Path) -> None:
    loose, left = tmp_path / "loose", tmp_path / "left"
    for directory in (loose, left):
        directory.mkdir(mode=0o755)
        directory.chmod(0o755)
    private_dir(loose)
    private_dir(left, exact=False)
    assert stat.S_IMODE(loose.stat().st_mode) == 0o700
    assert stat.S_IMODE(left.stat().st_mode) == 0o755


def test_create_private_makes_a_new_0600_file_and_never_writes_through_an_existing_name(
    tmp_path: Path,
) -> None:
    fresh = tmp_path / "transcript.jsonl"
    create_private(fresh, '{"type":"header"}\n', append=True)
    assert fresh.read_text() == '{"type":"header"}\n'
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600
    victim = tmp_path / "victim"
    victim.write_text("keep")
    planted = tmp_path / "aside.jsonl"
    planted.symlink_to(victim)
    for taken in (fresh, planted):
        with pytest.raises(FileExistsError):
            create_private(taken, b"other", sync=True)
    assert victim.read_text() == "keep"
    assert fresh.read_text() == '{"type":"header"}\n'
