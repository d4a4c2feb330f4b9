"""One session's figures, computed from its trace files only (so anyone can recompute them).

A session directory holds `frames.jsonl` (every JSON-RPC line between the eval and the server),
`model.jsonl` (every model request and reply, from the recording proxy), `harness-diff.jsonl` (the
history records the session's refinements appended, with before/after of each entry),
`checker.json` and `session.json` (timings, stop reason, error). `measure_session(dir)` turns them
into a `SessionResult`; the runner writes nothing into results.json that is not computed here.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from continual_eval.jsonl import read_jsonl
from continual_eval.scripted import entries_in_prompt, request_kind
from continual_eval.use import followed, noise, shown_entries


@dataclass
class SessionResult:
    task: str
    arm: str
    session: int
    passed: bool
    checker_exit: int | None
    agent_requests: int
    refine_requests: int
    input_tokens: int  # excludes cache reads
    output_tokens: int
    cache_read_tokens: int
    refine_tokens: int  # input + output of the refinement calls (review gate, planner), inside the totals
    usage_reported: bool  # every request's reply carried usage
    cells_run: int
    cells_failed: int
    wall_seconds: float  # the task prompt, from request to answer
    refine_seconds: float
    harness_entries_in_prompt: int
    refinements_applied: list[str] = field(default_factory=list)
    stop_reason: str | None = None
    error: str | None = None
    # Use, not just presence: entry ids shown in the first agent request, those a cell followed, and
    # those that are noise (content-free or duplicate); see continual_eval.use.
    entries_shown: list[str] = field(default_factory=list)
    entries_followed: list[str] = field(default_factory=list)
    entries_noise: list[str] = field(default_factory=list)
    # Where the session sits in the run (session.json): the seed sent, the stream (order) number,
    # the round (stream: 1, or 2 for the re-run), the task's place in the order; the task's family,
    # variant and control group when the task declares them.
    seed: int | None = None
    stream: int | None = None
    round: int = 1
    position: int = 1
    family: str | None = None
    variant: str | None = None
    control: str | None = None
    cheated: bool = False
    # `learning+curate`: entries the curator's pass before this session took out of the prompt
    curated: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def task_tokens(self) -> int:
        """Tokens spent on the task itself (the refinement calls' share taken out)."""
        return self.tokens - self.refine_tokens

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["tokens"] = self.tokens
        data["task_tokens"] = self.task_tokens
        return data


def _system_prompt(request: Any) -> str:
    if not isinstance(request, dict):
        return ""
    messages = request.get("messages") or []
    if not messages or not isinstance(messages[0], dict) or messages[0].get("role") != "system":
        return ""
    content = messages[0].get("content")
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def _cells(frames: list[dict[str, Any]], until_update: int | None) -> tuple[int, int, list[str]]:
    """Cells started, cells that failed, and the cells' code, from the task prompt's `session/update`s."""
    codes: list[str] = []
    started: set[str] = set()
    failed: set[str] = set()
    seen = 0
    for frame in frames:
        msg = frame.get("msg") or {}
        if frame.get("dir") != "in" or msg.get("method") != "session/update":
            continue
        seen += 1
        if until_update is not None and seen > until_update:
            break
        update = (msg.get("params") or {}).get("update") or {}
        kind = update.get("sessionUpdate")
        call = str(update.get("toolCallId") or "")
        if kind == "tool_call" and update.get("kind") == "execute":
            started.add(call)
            raw = update.get("rawInput") or {}
            if isinstance(raw, dict) and isinstance(raw.get("code"), str):
                codes.append(raw["code"])
        if kind in ("tool_call", "tool_call_update") and call in started and update.get("status") == "failed":
            failed.add(call)
    return len(started), len(failed), codes


def measure_session(folder: Path, *, task: str, arm: str, session: int) -> SessionResult:
    meta: dict[str, Any] = json.loads((folder / "session.json").read_text(encoding="utf-8"))
    checker: dict[str, Any] = (
        json.loads((folder / "checker.json").read_text(encoding="utf-8"))
        if (folder / "checker.json").is_file()
        else {"passed": False, "exit_code": None}
    )
    exchanges = [e for e in read_jsonl(folder / "model.jsonl") if e.get("method") == "POST"]
    agent = refine = 0
    input_tokens = output_tokens = cache_reads = refine_tokens = 0
    reported = True
    entries: int | None = None
    system = ""
    for exchange in exchanges:
        kind = request_kind(exchange.get("request") or {})
        usage = exchange.get("usage") or {}
        reported = reported and bool(usage.get("reported"))
        used_in, used_out = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
        input_tokens += used_in
        output_tokens += used_out
        cache_reads += int(usage.get("cache_read_tokens") or 0)
        if kind == "turn":
            agent += 1
            if entries is None:
                system = _system_prompt(exchange.get("request"))
                entries = entries_in_prompt(system)
        else:
            refine += 1
            refine_tokens += used_in + used_out
    cells_run, cells_failed, codes = _cells(read_jsonl(folder / "frames.jsonl"), meta.get("task_updates"))
    shown = shown_entries(system)
    applied = [
        str(record.get("id"))
        for record in read_jsonl(folder / "harness-diff.jsonl")
        if any(edit.get("applied") for edit in record.get("applied_edits") or [])
    ]
    return SessionResult(
        task=task,
        arm=arm,
        session=session,
        passed=bool(checker.get("passed")),
        checker_exit=checker.get("exit_code"),
        agent_requests=agent,
        refine_requests=refine,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=cache_reads,
        refine_tokens=refine_tokens,
        usage_reported=reported and bool(exchanges),
        cells_run=cells_run,
        cells_failed=cells_failed,
        wall_seconds=round(float(meta.get("wall_seconds") or 0.0), 3),
        refine_seconds=round(float(meta.get("refine_seconds") or 0.0), 3),
        harness_entries_in_prompt=entries or 0,
        refinements_applied=applied,
        stop_reason=meta.get("stop_reason"),
        error=meta.get("error"),
        entries_shown=[e.id for e in shown],
        entries_followed=[e.id for e in shown if followed(e, codes)],
        entries_noise=noise(shown),
        seed=meta.get("seed"),
        stream=meta.get("stream"),
        round=int(meta.get("round") or session),
        position=int(meta.get("position") or 1),
        family=meta.get("family"),
        variant=meta.get("variant"),
        control=meta.get("control"),
        cheated=bool(checker.get("cheated")),
        curated=int((meta.get("curation") or {}).get("out_of_prompt") or 0),
    )
