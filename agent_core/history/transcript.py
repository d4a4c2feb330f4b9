"""Session transcripts: append-only JSONL under `<home>/sessions/<id>/transcript.jsonl`.

Line 1 is a header (`session_id`, `cwd`, `created_at`, `version`). Every later line is one record:
`event` (a turn event to replay), `message` (one model-context message), `compaction` (the summary
and the messages kept; the context restarts from it), `context` (the same restart for another
reason), `title`, `config`, `usage`. Each line is
written whole and flushed, so a crash loses at most the line being written; a torn last line is
ignored on load (and cut off before the next append, so it cannot glue onto a new line).

`meta.json` beside the transcript caches what `session/list` needs (cwd, title), so listing does
not read every transcript, and `sessions/.index.json` (session_index.py) gathers the meta files in
one; the last activity is the transcript's mtime. Files are 0600, directories 0700.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from agent_core import events as ev
from agent_core.history.codec import event_from_json, event_to_json
from agent_core.history.session_files import (
    META,
    TRANSCRIPT,
    header_record,
    iso,
    meta_record,
)
from agent_core.history.session_files import now_iso as now_iso  # re-exported: callers import it here
from agent_core.safetext import scrub
from host_base.private_files import private_dir, write_atomic

log = logging.getLogger(__name__)

_iso = iso


def _iso_from_timestamp(timestamp: float) -> str:
    return _iso(datetime.fromtimestamp(timestamp, UTC))


def resolve_cwd(cwd: str) -> str:
    """Sessions are listed by resolved path, so `~/p`, `/home/u/p/` and a symlink all match.

    Raises ValueError naming the path when it cannot be one at all (too long, a NUL byte): that
    is the client's cwd at fault, not the data dir.
    """
    shown = cwd if len(cwd) <= 80 else f"{cwd[:60]}... ({len(cwd)} characters)"
    try:
        resolved = Path(cwd).expanduser().resolve()
        os.stat(resolved)
    except (FileNotFoundError, NotADirectoryError):
        return str(resolved)  # a missing cwd is the caller's check (with its own message)
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ValueError(f"session cwd {shown!r} is not a usable path: {why}") from None
    return str(resolved)


# Session ids are ours (`sess_<hex>`), but load/resume/prompt take them from the client: only a
# short, plain name may ever become a path (no separators, no leading dot, no ENAMETOOLONG).
SESSION_ID_MAX = 128
_SESSION_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
# Never follow a symlink planted where a session file should be (a lock, meta, transcript written
# outside the data dir). O_NOFOLLOW is POSIX; elsewhere the flag is 0 and the dir check remains.
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class TranscriptDamaged(ValueError):
    """A transcript whose header line is missing or unreadable: the session is on disk but damaged."""

    def __init__(self, path: Path, first_record: int | None) -> None:
        where = f" (the first readable record is on line {first_record})" if first_record else ""
        super().__init__(
            f"the transcript {path} is damaged: its first line is not a valid session header{where}; "
            "the session cannot be loaded until the file is repaired or restored from a backup"
        )
        self.path = path


class UnsafeSessionPath(ValueError):
    """A session path is a symbolic link: it is refused, never followed."""


def _private_dir(path: Path) -> None:
    """Create `path` and every missing parent with mode 0700; an existing `path` is made 0700
    (`host_base`'s `private_dir`)."""
    private_dir(path)


def _write_private(path: Path, text: str) -> None:
    """Atomic replace of a small file, mode 0600 (`host_base`'s `write_atomic`)."""
    write_atomic(path, text, sync=False)


@dataclass(frozen=True)
class SessionSummary:
    """One `session/list` entry."""

    session_id: str
    cwd: str
    title: str | None
    updated_at: str  # ISO-8601 UTC


@dataclass(frozen=True)
class SessionPage:
    """One page of `session/list` and the cursor to the next."""

    sessions: list[SessionSummary]
    next_cursor: str | None = None


@dataclass
class LoadedTranscript:
    """Everything a transcript says: enough to rebuild the model context and replay the session."""

    session_id: str
    cwd: str
    created_at: str
    messages: list[dict[str, Any]] = field(default_factory=list)  # model context (after compaction)
    events: list[ev.TurnEvent] = field(default_factory=list)  # to replay, in order
    title: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    last_prompt_tokens: int = 0
    compactions: int = 0
    skipped_lines: int = 0
    lines: int = 0  # lines read (`iter_events` replays no further: a later append is live, not history)


class TranscriptWriter:
    """Appends records to one session's transcript; each line flushed as it is written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        _cut_torn_tail(path)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW, 0o600)
        self._fh: IO[str] | None = os.fdopen(fd, "a", encoding="utf-8")

    def append(self, record: Mapping[str, Any]) -> None:
        if self._fh is None:
            raise ValueError(f"transcript {self.path} is closed")
        # Every string in a record is untrusted (model, user, kernel, files): a lone surrogate is
        # replaced here so no character can make this write raise and leave the session unusable.
        line = scrub(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
        self._fh.write(line + "\n")
        self._fh.flush()

    def event(self, event: ev.TurnEvent) -> None:
        self.append({"type": "event", "event": event_to_json(event)})

    def size(self) -> int:
        """The transcript's size in bytes (every record written so far is flushed)."""
        if self._fh is None:
            raise ValueError(f"transcript {self.path} is closed")
        return os.fstat(self._fh.fileno()).st_size

    def append_raw(self, lines: bytes) -> None:
        """Append whole records already encoded (lines a rewind keeps after its cut)."""
        if self._fh is None:
            raise ValueError(f"transcript {self.path} is closed")
        if lines:
            self._fh.write(lines.decode("utf-8", errors="replace"))
            self._fh.flush()

    def message(self, message: Mapping[str, Any]) -> None:
        self.append({"type": "message", "message": dict(message)})

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def _cut_torn_tail(path: Path) -> None:
    """Drop a partial last line (a crash mid-write) so the next record starts on its own line."""
    try:
        with path.open("rb+") as fh:
            size = fh.seek(0, os.SEEK_END)
            if size == 0:
                return
            fh.seek(size - 1)
            if fh.read(1) == b"\n":
                return
            # Walk back to the last newline; transcripts are append-only so this is the torn record.
            pos = size
            block = 4096
            while pos > 0:
                start = max(0, pos - block)
                fh.seek(start)
                chunk = fh.read(pos - start)
                idx = chunk.rfind(b"\n")
                if idx >= 0:
                    fh.truncate(start + idx + 1)
                    return
                pos = start
            fh.truncate(0)
    except FileNotFoundError:
        return


class SessionStore:
    """The sessions directory: create, append, load, list, delete."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.root = home / "sessions"

    def session_dir(self, session_id: str) -> Path:
        """`<home>/sessions/<id>`. Raises ValueError for an id that is not a plain short name, and
        `UnsafeSessionPath` when that path is a symbolic link (it would lead outside the data dir)."""
        if (
            not isinstance(session_id, str)
            or len(session_id) > SESSION_ID_MAX
            or _SESSION_ID.fullmatch(session_id) is None
        ):
            shown = session_id if len(str(session_id)) <= 40 else f"{str(session_id)[:40]}..."
            raise ValueError(
                f"invalid session id {shown!r}: at most {SESSION_ID_MAX} letters, digits, '_', '.', '-'"
            )
        directory = self.root / session_id
        if os.path.islink(directory):
            raise UnsafeSessionPath(
                f"session directory {directory} is a symbolic link; continual-acp does not follow "
                "links in its data dir (remove the link, or move the real directory there)"
            )
        return directory

    def transcript_path(self, session_id: str) -> Path:
        return self.session_dir(session_id) / TRANSCRIPT

    def exists(self, session_id: str) -> bool:
        """Whether the session is on disk; False for an invalid id. Raises `UnsafeSessionPath`
        for a symlinked session directory, so the caller refuses it with that reason."""
        try:
            path = self.transcript_path(session_id)
        except UnsafeSessionPath:
            raise
        except ValueError:
            return False
        return path.is_file() and not path.is_symlink()

    def create(self, session_id: str, cwd: str) -> TranscriptWriter:
        """Start a new transcript with its header; the session dir is 0700, files 0600."""
        _private_dir(self.home)
        _private_dir(self.root)
        directory = self.session_dir(session_id)
        _private_dir(directory)
        cwd = resolve_cwd(cwd)
        created = now_iso()
        writer = TranscriptWriter(directory / TRANSCRIPT)
        writer.append(header_record(session_id, cwd, created))
        self.write_meta(session_id, cwd=cwd, title=None, created_at=created, updated_at=created)
        return writer

    def open(self, session_id: str) -> TranscriptWriter:
        path = self.transcript_path(session_id)
        if not path.is_file():
            raise FileNotFoundError(path)
        return TranscriptWriter(path)

    def write_meta(
        self, session_id: str, *, cwd: str, title: str | None, created_at: str, updated_at: str
    ) -> None:
        meta = meta_record(session_id, cwd=cwd, title=title, created_at=created_at, updated_at=updated_at)
        _write_private(self.session_dir(session_id) / META, json.dumps(meta))

    def read_meta(self, session_id: str) -> dict[str, Any] | None:
        try:
            data = json.loads((self.session_dir(session_id) / META).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict) and data.get("cwd"):
            return data
        # No (or a damaged) meta file: fall back to the transcript header.
        try:
            header = _read_header(self.transcript_path(session_id))
        except (OSError, ValueError):
            return None
        if header is None:
            return None
        return {
            "session_id": session_id,
            "cwd": header.get("cwd", ""),
            "title": None,
            "created_at": header.get("created_at", ""),
            "updated_at": header.get("created_at", ""),
        }

    def load(self, session_id: str, *, events: bool = True) -> LoadedTranscript:
        """Read a transcript; malformed lines are skipped (a torn last one silently).

        `events=False` leaves `events` empty (the replay streams them with `iter_events` instead,
        so a long transcript is never held in memory as both messages and events)."""
        path = self.transcript_path(session_id)
        loaded: LoadedTranscript | None = None
        pending_skips = 0
        for lineno, record in _records(path, skip_events=not events):
            if loaded is not None:
                loaded.lines = lineno
            if record is None:
                pending_skips += 1
                continue
            if pending_skips:
                # A bad line followed by good ones is damage, not a torn tail: say so.
                log.warning("%s: skipped %d malformed line(s) before line %d", path, pending_skips, lineno)
                if loaded is not None:
                    loaded.skipped_lines += pending_skips
                pending_skips = 0
            kind = record.get("type")
            if kind == "header":
                loaded = LoadedTranscript(
                    session_id=str(record.get("session_id") or session_id),
                    cwd=str(record.get("cwd") or ""),
                    created_at=str(record.get("created_at") or ""),
                )
                continue
            if loaded is None:
                raise TranscriptDamaged(path, lineno)
            try:
                _apply(loaded, record)
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("%s: skipped line %d: %s", path, lineno, exc)
                loaded.skipped_lines += 1
        if loaded is None:
            raise TranscriptDamaged(path, None)
        return loaded

    def iter_events(self, session_id: str, lines: int | None = None) -> Iterator[ev.TurnEvent]:
        """The transcript's events in order, read as they are taken (up to line `lines`); a line
        that does not decode is skipped, as `load` skips it."""
        path = self.transcript_path(session_id)
        for lineno, record in _records(path):
            if lines is not None and lineno > lines:
                return
            if record is None or record.get("type") != "event":
                continue
            try:
                event = event_from_json(record["event"])
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("%s: skipped line %d: %s", path, lineno, exc)
                continue
            yield event

    def list(self, cwd: str | None = None, cursor: str | None = None, limit: int = 50) -> SessionPage:
        """Sessions (for `cwd`, resolved, or all), newest first; `cursor` continues a previous page."""
        want = resolve_cwd(cwd) if cwd else None
        summaries: list[SessionSummary] = []
        if self.root.is_dir():
            from agent_core.history.session_index import indexed_sessions

            root = str(self.root)
            for name, meta in indexed_sessions(self.root, META, self.read_meta).items():
                if want is not None and meta.get("cwd") != want:
                    continue
                updated = str(meta.get("updated_at") or meta.get("created_at") or "")
                try:
                    # Every append touches the transcript, so its mtime is the last activity; meta.json
                    # is only rewritten when the title changes (keeps turns free of extra file writes).
                    mtime = os.stat(os.path.join(root, name, TRANSCRIPT)).st_mtime
                    updated = max(updated, _iso_from_timestamp(mtime))
                except OSError:
                    pass
                summaries.append(
                    SessionSummary(
                        session_id=name, cwd=str(meta.get("cwd")), title=meta.get("title"), updated_at=updated
                    )
                )
        summaries.sort(key=lambda s: (s.updated_at, s.session_id), reverse=True)
        if cursor:
            after = _decode_cursor(cursor)
            summaries = [s for s in summaries if (s.updated_at, s.session_id) < after]
        limit = max(1, limit)
        page = summaries[:limit]
        next_cursor = _encode_cursor(page[-1]) if len(summaries) > limit else None
        return SessionPage(page, next_cursor)

    def delete(self, session_id: str) -> bool:
        """Remove a session's directory; False when there was nothing to remove (idempotent)."""
        directory = self.session_dir(session_id)
        if not directory.exists():
            return False
        shutil.rmtree(directory)
        return True


# How `TranscriptWriter.event` starts a line (compact separators, "type" the first key).
_EVENT_PREFIX = '{"type":"event",'
_SKIPPED_EVENT: dict[str, Any] = {"type": "event-skipped"}


def _apply(loaded: LoadedTranscript, record: Mapping[str, Any]) -> None:
    kind = record.get("type")
    if kind == "event-skipped":
        return
    if kind == "event":
        loaded.events.append(event_from_json(record["event"]))
    elif kind == "message":
        message = record["message"]
        if not isinstance(message, dict) or "role" not in message:
            raise ValueError("message record without a role")
        loaded.messages.append(message)
    elif kind == "compaction":
        loaded.messages = [dict(m) for m in record["messages"]]
        loaded.compactions += 1
    elif kind == "context":  # the context rewritten for another reason (e.g. images removed)
        loaded.messages = [dict(m) for m in record["messages"]]
    elif kind == "title":
        loaded.title = str(record["title"])
    elif kind == "config":
        loaded.config[str(record["key"])] = record["value"]
    elif kind == "usage":
        loaded.last_prompt_tokens = int(record["prompt_tokens"])
    else:
        raise ValueError(f"unknown record type {kind!r}")


def _records(path: Path, *, skip_events: bool = False) -> Iterator[tuple[int, dict[str, Any] | None]]:
    with path.open("r", encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            if skip_events and line.startswith(_EVENT_PREFIX):
                yield lineno, _SKIPPED_EVENT  # decoded only when replayed (iter_events)
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                yield lineno, None
                continue
            yield lineno, value if isinstance(value, dict) else None


def _read_header(path: Path) -> dict[str, Any] | None:
    with path.open("r", encoding="utf-8", errors="replace") as fh:
        first = fh.readline()
    try:
        value = json.loads(first)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) and value.get("type") == "header" else None


def _encode_cursor(summary: SessionSummary) -> str:
    raw = json.dumps([summary.updated_at, summary.session_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[str, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        updated_at, session_id = json.loads(base64.urlsafe_b64decode(padded.encode()))
        return str(updated_at), str(session_id)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"invalid session list cursor {cursor!r}") from exc
