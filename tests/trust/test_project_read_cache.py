"""A project harness read without a stat of every entry file: the same state object while nothing
changed, and every kind of change on disk (in place, by another writer, a git checkout) seen by the
very next read. `DirWatch` is the kernel's inotify, exercised for real."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness_store.dir_watch import LOCAL_FILE_SYSTEMS, DirWatch, file_system
from harness_store.project import ProjectStore, project_root

from .conftest import git, memory

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="inotify is Linux's")


def _require_local(path: Path) -> None:
    if file_system(path) not in LOCAL_FILE_SYSTEMS:
        pytest.skip(f"{path} is on {file_system(path)}: not watched")


def test_a_watch_reports_a_write_a_new_file_a_rename_and_a_missing_directory_appearing(
    tmp_path: Path,
) -> None:
    _require_local(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.md").write_text("one")
    watch = DirWatch([tmp_path, tmp_path / "a", tmp_path / "b"])  # b does not exist yet
    changes = {
        "in place": lambda: (tmp_path / "a" / "x.md").write_text("two"),
        "new file": lambda: (tmp_path / "a" / "y.md").write_text("new"),
        "renamed": lambda: (tmp_path / "a" / "y.md").rename(tmp_path / "a" / "z.md"),
        "removed": lambda: (tmp_path / "a" / "z.md").unlink(),
        "created dir": lambda: (tmp_path / "b").mkdir(),
        "file in it": lambda: (tmp_path / "b" / "w.md").write_text("w"),
        "dir gone": lambda: shutil.rmtree(tmp_path / "a"),
    }
    seen = {}
    for name, change in changes.items():
        watch.arm()
        quiet = watch.changed()
        change()
        seen[name] = (quiet, watch.changed())
    assert seen == dict.fromkeys(changes, (False, True))
    # Reading a file is not a change.
    watch.arm()
    (tmp_path / "b" / "w.md").read_text()
    assert watch.changed() is False


def test_an_unarmed_or_unwatchable_watch_always_says_changed(tmp_path: Path) -> None:
    assert DirWatch([tmp_path]).changed() is True  # never armed
    orphan = DirWatch([tmp_path / "missing" / "deeper"])  # no watched parent to see it appear
    orphan.arm()
    assert orphan.changed() is True


def test_a_project_read_is_the_same_state_until_an_entry_file_changes_then_the_change_is_read(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _require_local(repo)
    store = ProjectStore(repo)
    store.apply({"edits": [memory("A", "one"), memory("B", "two")]}, trigger="user")
    first = store.load()
    scans: list[int] = []
    real_scan = store.backend._scan  # type: ignore[attr-defined]
    monkeypatch.setattr(store.backend, "_scan", lambda: (scans.append(1), real_scan())[1])
    assert store.load() is first
    assert scans == []  # the watch said nothing changed: no listing, no stat of the entry files
    path = project_root(repo) / "entries" / "memory" / "a.md"
    # A hand edit in place (same directory entry, no rename): the next read has it.
    path.write_text(path.read_text().replace("\none\n", "\nuno, changed by hand\n"))
    edited = store.load()
    assert edited is not first
    assert edited.get("memory", "a").content == "uno, changed by hand"  # type: ignore[union-attr]
    assert store.load() is edited
    # Another writer (another process's store) adds an entry; then git takes the working tree back.
    ProjectStore(repo).apply({"edits": [memory("C", "three")]}, trigger="user")
    assert sorted(store.load().entries["memory"]) == ["a", "b", "c"]
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "harness")
    git(repo, "checkout", "-q", "HEAD~1")
    assert store.load().entries["memory"] == {}


def test_a_watched_directory_swapped_out_by_renaming_an_unwatched_parent_is_seen(tmp_path: Path) -> None:
    """A watch follows its directory's inode: after `mv .continual-acp away; mv other .continual-acp`
    the old inode (now elsewhere) hears nothing of the new one, so the path itself is checked too."""
    _require_local(tmp_path)
    (tmp_path / "outer" / "h").mkdir(parents=True)
    (tmp_path / "other" / "h").mkdir(parents=True)
    watch = DirWatch([tmp_path / "outer" / "h"])
    watch.arm()
    (tmp_path / "outer").rename(tmp_path / "away")
    (tmp_path / "other").rename(tmp_path / "outer")
    assert watch.changed() is True


def test_a_write_by_another_process_is_seen(tmp_path: Path) -> None:
    _require_local(tmp_path)
    target = tmp_path / "x.md"
    target.write_text("one")
    watch = DirWatch([tmp_path])
    watch.arm()
    subprocess.run([sys.executable, "-c", f"open({str(target)!r}, 'w').write('two')"], check=True)
    assert watch.changed() is True


def test_a_watch_refused_by_the_kernel_or_a_remote_file_system_always_says_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-user watch limit cannot be lowered here without root, so the refusal is stood in for;
    an NFS mount is stood in for by the mount table's answer."""
    import harness_store.dir_watch as dir_watch

    _require_local(tmp_path)
    (tmp_path / "a").mkdir()
    real_watch = dir_watch._SHARED.watch
    monkeypatch.setattr(
        dir_watch._SHARED, "watch", lambda path: None if path.name == "a" else real_watch(path)
    )
    limited = DirWatch([tmp_path, tmp_path / "a"])  # `a` exists: its parent's watch does not cover it
    limited.arm()
    assert limited.changed() is True
    monkeypatch.undo()
    monkeypatch.setattr(dir_watch, "file_system", lambda path: "nfs4")
    remote = DirWatch([tmp_path])
    remote.arm()
    assert remote.changed() is True


def test_a_file_renamed_over_a_watched_file_from_an_unwatched_directory_is_seen(tmp_path: Path) -> None:
    """How an editor or `git` saves: the new text written elsewhere, then renamed over the entry."""
    _require_local(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "spare").mkdir()
    (tmp_path / "a" / "x.md").write_text("one")
    (tmp_path / "spare" / "x.md.new").write_text("two")
    watch = DirWatch([tmp_path / "a"])
    watch.arm()
    assert watch.changed() is False
    (tmp_path / "spare" / "x.md.new").replace(tmp_path / "a" / "x.md")
    assert watch.changed() is True


def test_an_entry_file_that_is_a_symlink_is_read_again_when_its_target_changes(
    repo: Path, tmp_path: Path
) -> None:
    """A write to a symlink's target raises no event in the entries directory: such a harness is
    checked file by file, as before the watch."""
    _require_local(repo)
    store = ProjectStore(repo)
    store.apply({"edits": [memory("A", "one")]}, trigger="user")
    path = project_root(repo) / "entries" / "memory" / "a.md"
    target = tmp_path / "shared-a.md"
    target.write_text(path.read_text())
    path.unlink()
    path.symlink_to(target)
    assert store.load().get("memory", "a").content == "one"  # type: ignore[union-attr]
    target.write_text(target.read_text().replace("\none\n", "\nuno, changed at the target\n"))
    assert store.load().get("memory", "a").content == "uno, changed at the target"  # type: ignore[union-attr]


def test_a_directory_that_appears_later_on_a_remote_file_system_is_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mount table is read again whenever a watched directory is not the one it was read for:
    `.continual-acp` made after the first read as a link onto an NFS mount (stood in for here)."""
    import os

    import harness_store.dir_watch as dir_watch

    _require_local(tmp_path)
    remote = tmp_path / "remote"
    remote.mkdir()
    real_file_system = dir_watch.file_system

    def file_system(path: Path, mounts: object = None) -> str | None:
        if os.path.realpath(path).startswith(str(remote)):
            return "nfs4"
        return real_file_system(path)  # type: ignore[no-any-return]

    monkeypatch.setattr(dir_watch, "file_system", file_system)
    harness = tmp_path / "harness"
    watch = DirWatch([harness])
    watch.arm()  # the directory does not exist yet: read file by file
    assert watch.changed() is True
    harness.symlink_to(remote)
    watch.arm()
    assert watch.changed() is True  # on the remote mount: another machine's write raises no event here


def test_an_entry_replaced_with_text_of_the_same_size_and_time_is_read_again(repo: Path) -> None:
    """A save by rename (editors, `git checkout`) inside one tick of the file-time clock: same size and
    mtime as the file read before, but another file."""
    import os

    store = ProjectStore(repo)
    store.apply({"edits": [memory("A", "one")]}, trigger="user")
    path = project_root(repo) / "entries" / "memory" / "a.md"
    assert store.load().get("memory", "a").content == "one"  # type: ignore[union-attr]
    before = path.stat()
    fresh = path.with_name(".a.md.new")
    fresh.write_text(path.read_text().replace("\none\n", "\nuno\n"))
    os.utime(fresh, ns=(before.st_atime_ns, before.st_mtime_ns))
    fresh.replace(path)
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert store.load().get("memory", "a").content == "uno"  # type: ignore[union-attr]


def test_a_dangling_symlink_in_place_of_a_directory_leaves_the_watch_untrusted(tmp_path: Path) -> None:
    """Its target appearing later raises no event on the parent: nothing may be assumed of it."""
    _require_local(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    watched = tmp_path / "watched"
    watched.mkdir()
    (watched / "link").symlink_to(elsewhere)
    watch = DirWatch([watched, watched / "link"])
    watch.arm()
    elsewhere.mkdir()
    (elsewhere / "x.md").write_text("x")
    assert watch.changed() is True
