"""The turn loop with a real kernel, the real openai client and the scripted endpoint."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest
from agent_helpers import RecordingEditor, collect, config_for, of_type, running_agent

from agent_core import events as ev
from agent_core.errors import KernelBackendUnavailable, ModelError
from agent_core.ports import NoEditor
from agent_core.testing import (
    ScriptedModelServer,
    error,
    length_cut,
    reasoning,
    refusal,
    response,
    stall,
    text,
    tool_call,
    usage,
)

pytestmark = pytest.mark.anyio

CANCEL_BUDGET = 1.0  # seconds: the contract for `session/cancel`: the turn ends within a second


def _bad_args_call() -> dict:
    """A tool call whose arguments are not JSON: answered with an error, no kernel needed."""
    return response(
        [{"tool_call": {"index": 0, "id": "c_bad", "name": "ipython", "arguments": "{oops"}}],
        finish_reason="tool_calls",
    )


async def test_text_only_turn_streams_chunks_reports_usage_and_titles_the_session(tmp_path: Path) -> None:
    async def scenario(server: ScriptedModelServer) -> tuple[list[ev.TurnEvent], list[ev.TurnEvent], str]:
        async with running_agent(config_for(tmp_path, server)) as agent:
            session = await agent.new_session(str(tmp_path), NoEditor())
            first = await collect(session, "Explain the build\nin detail")
            second = await collect(session, "thanks")
            return first, second, await session.kernel_status()

    script = [
        text("It uses make.", split=3, usage=usage(500, 10, cached_tokens=300, cache_write_tokens=40)),
        text("ok"),
    ]
    with ScriptedModelServer(script) as server:
        first, second, status = await scenario(server)
    assert "".join(e.text for e in of_type(first, ev.MessageChunk)) == "It uses make."
    assert len({e.message_id for e in of_type(first, ev.MessageChunk)}) == 1
    [report] = of_type(first, ev.UsageReport)
    assert (report.used, report.input_tokens, report.cache_read_tokens, report.cache_write_tokens) == (
        510,
        200,
        300,
        40,
    )
    assert of_type(first, ev.TitleChanged) == [ev.TitleChanged("Explain the build")]
    assert of_type(second, ev.TitleChanged) == []
    assert first[-1] == ev.TurnEnded("end_turn") and second[-1] == ev.TurnEnded("end_turn")
    assert of_type(first, ev.UserMessage) == []  # the editor shows the prompt itself; replays carry it
    assert status.startswith("not started")  # no cell ran, so no kernel was started


async def test_two_cells_feed_their_outputs_into_the_next_requests(tmp_path: Path) -> None:
    async def scenario(server: ScriptedModelServer) -> list[ev.TurnEvent]:
        async with running_agent(config_for(tmp_path, server)) as agent:
            session = await agent.new_session(str(tmp_path), NoEditor())
            return await collect(session, "compute")

    script = [
        tool_call("a = 6 * 7\nprint(a)", "multiply", split=30),
        tool_call("print(a + 1)\n1 / 0"),
        text("a is 42; dividing failed"),
    ]
    with ScriptedModelServer(script) as server:
        events = await scenario(server)
        requests = server.requests
    assert len(requests) == 3
    assert requests[0]["messages"][0]["role"] == "system"
    assert requests[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": requests[1]["messages"][-2]["tool_calls"][0]["id"],
        "content": "42\n",
    }
    last_tool = requests[2]["messages"][-1]
    assert (
        last_tool["role"] == "tool"
        and "43" in last_tool["content"]
        and "ZeroDivisionError" in last_tool["content"]
    )
    started = of_type(events, ev.CellStarted)
    assert [s.title for s in started] == ["multiply", "print(a + 1)"]
    finished = of_type(events, ev.CellFinished)
    assert [f.status for f in finished] == ["completed", "failed"]
    assert finished[1].error is not None and finished[1].error.startswith("ZeroDivisionError")
    assert next(o.text for o in of_type(events, ev.CellOutput)) == "42\n"
    assert events[-1] == ev.TurnEnded("end_turn")


async def test_reasoning_deltas_become_thought_chunks(tmp_path: Path) -> None:
    async def scenario(server: ScriptedModelServer) -> list[ev.TurnEvent]:
        async with running_agent(config_for(tmp_path, server)) as agent:
            session = await agent.new_session(str(tmp_path), NoEditor())
            return await collect(session, "think")

    with ScriptedModelServer([reasoning("first this, then that", "answer", split=4)]) as server:
        events = await scenario(server)
    assert "".join(t.text for t in of_type(events, ev.ThoughtChunk)) == "first this, then that"
    assert "".join(m.text for m in of_type(events, ev.MessageChunk)) == "answer"


async def test_truncation_mid_tool_call_runs_nothing_and_ends_with_max_tokens(tmp_path: Path) -> None:
    async def scenario(server: ScriptedModelServer) -> tuple[list[ev.TurnEvent], list[dict], str]:
        async with running_agent(config_for(tmp_path, server)) as agent:
            session = await agent.new_session(str(tmp_path), NoEditor())
            events = await collect(session, "write a big cell")
            return events, list(session.messages), await session.kernel_status()

    with ScriptedModelServer([length_cut("Running it:", tool_code="open('x', 'w').write('y')")]) as server:
        events, messages, status = await scenario(server)
    assert of_type(events, ev.CellStarted) == []
    assert events[-1].stop_reason == "max_tokens"  # type: ignore[union-attr]
    assert "output limit" in (events[-1].message or "")  # type: ignore[union-attr]
    assert "output limit" in "".join(m.text for m in of_type(events, ev.MessageChunk))
    assert [m["role"] for m in messages] == ["user"]  # the half answer is not in the model context
    assert not (tmp_path / "x").exists()
    assert status.startswith("not started")


async def test_content_filter_ends_the_turn_as_refusal(tmp_path: Path) -> None:
    async def scenario(server: ScriptedModelServer) -> list[ev.TurnEvent]:
        async with running_agent(config_for(tmp_path, server)) as agent:
            session = await agent.new_session(str(tmp_path), NoEditor())
            return await collect(session, "something")

    with ScriptedModelServer([refusal()]) as server:
        events = await scenario(server)
    assert events[-1].stop_reason == "refusal"  # type: ignore[union-attr]


async def test_max_turn_requests_stops_a_model_that_never_finishes(tmp_path: Path) -> None:
    async def scenario(server: ScriptedModelServer) -> list[ev.TurnEvent]:
        async with running_agent(config_for(tmp_path, server, max_turn_requests=3)) as agent:
            session = await agent.new_session(str(tmp_path), NoEditor())
            return await collect(session, "loop")

    with ScriptedModelServer([_bad_args_call() for _ in range(5)]) as server:
        events = await scenario(server)
        assert len(server.requests) == 3
        assert "not valid JSON" in server.requests[1]["messages"][-1]["content"]
    assert events[-1].stop_reason == "max_turn_requests"  # type: ignore[union-attr]


async def test_no_model_configured_answers_with_what_to_set(tmp_path: Path) -> None:
    async def scenario() -> list[ev.TurnEvent]:
        async with running_agent(config_for(tmp_path, None)) as agent:
            session = await agent.new_session(str(tmp_path), NoEditor())
            return await collect(session, "hello")

    events = await scenario()
    said = "".join(m.text for m in of_type(events, ev.MessageChunk))
    for setting in ("CONTINUAL_ACP_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "config.toml"):
        assert setting in said
    assert "Traceback" not in said and events[-1] == ev.TurnEnded("end_turn")


async def test_500_then_success_inside_a_turn(tmp_path: Path) -> None:
    async def scenario(server: ScriptedModelServer) -> list[ev.TurnEvent]:
        async with running_agent(config_for(tmp_path, server)) as agent:
            session = await agent.new_session(str(tmp_path), NoEditor())
            return await collect(session, "hi")

    with ScriptedModelServer([error(500), text("recovered")]) as server:
        events = await scenario(server)
        assert len(server.requests) == 2
    assert "".join(m.text for m in of_type(events, ev.MessageChunk)) == "recovered"


async def test_endpoint_down_raises_model_error_and_the_next_turn_works(tmp_path: Path) -> None:
    async def scenario(server: ScriptedModelServer) -> tuple[str, list[ev.TurnEvent], list[dict]]:
        config = config_for(tmp_path, server, max_retries=0)
        good_url = config.base_url
        config.base_url = "http://127.0.0.1:9/v1"  # discard port: nothing listens there
        async with running_agent(config) as agent:
            session = await agent.new_session(str(tmp_path), NoEditor())
            with pytest.raises(ModelError) as info:
                await collect(session, "hello")
            config.base_url = good_url
            await agent.model.aclose()  # drop the client bound to the dead endpoint
            events = await collect(session, "again")
            return str(info.value), events, list(session.messages)

    with ScriptedModelServer([text("back")]) as server:
        message, events, messages = await scenario(server)
    assert "http://127.0.0.1:9/v1" in message and "OPENAI_BASE_URL" in message
    assert events[-1] == ev.TurnEnded("end_turn")
    assert [m["role"] for m in messages] == ["user", "user", "assistant"]


async def test_a_second_prompt_waits_for_the_first(tmp_path: Path) -> None:
    async def scenario(server: ScriptedModelServer) -> list[tuple[str, ev.TurnEvent]]:
        log: list[tuple[str, ev.TurnEvent]] = []
        async with running_agent(config_for(tmp_path, server)) as agent:
            session = await agent.new_session(str(tmp_path), NoEditor())
            first_started = asyncio.Event()

            async def run(name: str, prompt: str) -> None:
                async for event in session.run_turn([ev.TextPart(prompt)]):
                    log.append((name, event))
                    first_started.set()

            a = asyncio.create_task(run("a", "first"))
            await asyncio.wait_for(first_started.wait(), 30)
            b = asyncio.create_task(run("b", "second"))
            await asyncio.wait_for(asyncio.gather(a, b), 60)
        return log

    script = [response([{"content": "A1"}, {"sleep": 0.3}, {"content": "A2"}]), text("B")]
    with ScriptedModelServer(script) as server:
        log = await scenario(server)
        second_request = server.requests[1]["messages"]
    names = [name for name, _ in log]
    assert names == sorted(names)  # every event of `a` before any of `b`
    assert [e for n, e in log if isinstance(e, ev.TurnEnded)] == [ev.TurnEnded("end_turn")] * 2
    assert {"role": "assistant", "content": "A1A2"} in second_request


async def test_cancel_during_streaming_ends_the_turn_within_a_second(tmp_path: Path) -> None:
    async def scenario(server: ScriptedModelServer) -> tuple[list[ev.TurnEvent], float, list[ev.TurnEvent]]:
        async with running_agent(config_for(tmp_path, server)) as agent:
            session = await agent.new_session(str(tmp_path), NoEditor())
            events: list[ev.TurnEvent] = []
            chunk = asyncio.Event()

            async def run() -> None:
                async for event in session.run_turn([ev.TextPart("go")]):
                    events.append(event)
                    if isinstance(event, ev.MessageChunk):
                        chunk.set()

            task = asyncio.create_task(run())
            await asyncio.wait_for(chunk.wait(), 30)
            started = time.perf_counter()
            await session.cancel()
            await asyncio.wait_for(task, 10)
            elapsed = time.perf_counter() - started
            await session.cancel()  # idempotent
            after = await collect(session, "next")
            return events, elapsed, after

    with ScriptedModelServer([stall(60, before="thinking"), text("next answer")]) as server:
        events, elapsed, after = await scenario(server)
        assert server.wait_for_disconnects(1, timeout=10)  # the model stream was really closed
    assert events[-1] == ev.TurnEnded("cancelled")
    assert elapsed < CANCEL_BUDGET
    assert after[-1] == ev.TurnEnded("end_turn")


async def test_cancel_during_a_cell_interrupts_it_and_the_kernel_stays_usable(tmp_path: Path) -> None:
    async def scenario(server: ScriptedModelServer) -> tuple[list[ev.TurnEvent], float, list[ev.TurnEvent]]:
        async with running_agent(config_for(tmp_path, server)) as agent:
            session = await agent.new_session(str(tmp_path), NoEditor())
            events: list[ev.TurnEvent] = []
            output = asyncio.Event()

            async def run() -> None:
                async for event in session.run_turn([ev.TextPart("sleep")]):
                    events.append(event)
                    if isinstance(event, ev.CellOutput):
                        output.set()

            task = asyncio.create_task(run())
            await asyncio.wait_for(output.wait(), 60)
            started = time.perf_counter()
            await session.cancel()
            await asyncio.wait_for(task, 10)
            elapsed = time.perf_counter() - started
            after = await collect(session, "still there?")
            return events, elapsed, after

    script = [
        tool_call("import time\nmarker = 'alive'\nprint('sleeping', flush=True)\ntime.sleep(60)"),
        tool_call("print(marker)"),
        text("yes"),
    ]
    with ScriptedModelServer(script) as server:
        events, elapsed, after = await scenario(server)
        third = server.requests[1]["messages"]
    assert events[-1] == ev.TurnEnded("cancelled")
    assert elapsed < CANCEL_BUDGET
    assert of_type(events, ev.CellFinished)[-1].status == "cancelled"
    assert of_type(after, ev.CellOutput)[0].text == "alive\n"
    # The cancelled call got an answer in the context, so the next request was valid.
    tool_answers = [m for m in third if m["role"] == "tool"]
    assert tool_answers and "Cancelled" in tool_answers[0]["content"]


async def test_ask_mode_reject_skips_the_cell_and_tells_the_model(tmp_path: Path) -> None:
    async def scenario(server: ScriptedModelServer, editor: RecordingEditor) -> list[ev.TurnEvent]:
        async with running_agent(config_for(tmp_path, server)) as agent:
            session = await agent.new_session(str(tmp_path), editor)
            session.set_mode("ask")
            return await collect(session, "delete things")

    editor = RecordingEditor(["reject"])
    with ScriptedModelServer(
        [tool_call("import shutil; shutil.rmtree('/')", "wipe"), text("ok, I will not")]
    ) as server:
        events = await scenario(server, editor)
        told = server.requests[1]["messages"][-1]
    assert [r.title for r in editor.requests] == ["wipe"]
    assert editor.requests[0].code == "import shutil; shutil.rmtree('/')"
    assert of_type(events, ev.CellStarted) == []
    assert told["role"] == "tool" and "rejected" in told["content"]
    assert events[-1] == ev.TurnEnded("end_turn")


async def test_ask_mode_allow_always_is_remembered_for_the_session(tmp_path: Path) -> None:
    async def scenario(server: ScriptedModelServer, editor: RecordingEditor) -> list[ev.TurnEvent]:
        async with running_agent(config_for(tmp_path, server)) as agent:
            session = await agent.new_session(str(tmp_path), editor)
            session.set_mode("ask")
            events = await collect(session, "one")
            events += await collect(session, "two")
            return events

    editor = RecordingEditor(["allow_always"])
    script = [tool_call("print('a')"), text("1"), tool_call("print('b')"), text("2")]
    with ScriptedModelServer(script) as server:
        events = await scenario(server, editor)
    assert len(editor.requests) == 1
    assert [o.text for o in of_type(events, ev.CellOutput)] == ["a\n", "b\n"]


async def test_cancel_while_permission_is_pending_resolves_it(tmp_path: Path) -> None:
    async def scenario(
        server: ScriptedModelServer, editor: RecordingEditor
    ) -> tuple[list[ev.TurnEvent], float]:
        async with running_agent(config_for(tmp_path, server)) as agent:
            session = await agent.new_session(str(tmp_path), editor)
            session.set_mode("ask")
            task = asyncio.create_task(collect(session, "run"))
            await asyncio.wait_for(editor.permission_asked.wait(), 30)
            started = time.perf_counter()
            await session.cancel()
            events = await asyncio.wait_for(task, 10)
            return events, time.perf_counter() - started

    editor = RecordingEditor()
    editor.hold_permission = True
    with ScriptedModelServer([tool_call("print(1)")]) as server:
        events, elapsed = await scenario(server, editor)
    assert events[-1] == ev.TurnEnded("cancelled") and elapsed < CANCEL_BUDGET
    assert of_type(events, ev.CellStarted) == []


@pytest.mark.parametrize("client_fs", [True, False])
async def test_editor_write_from_a_cell_emits_file_edited(tmp_path: Path, client_fs: bool) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("on disk\n")
    editor = RecordingEditor(files={str(target): "in the buffer\n"}, fs=client_fs)
    code = (
        "from kernel_bridge import hostclient as bridge\n"
        "before = bridge.call('editor.read', path='notes.txt')\n"
        "bridge.call('editor.write', path='notes.txt', text=before.upper())\n"
        "print(before, end='')"
    )

    async def scenario(server: ScriptedModelServer) -> list[ev.TurnEvent]:
        async with running_agent(config_for(tmp_path, server)) as agent:
            session = await agent.new_session(str(tmp_path), editor)
            return await collect(session, "shout")

    with ScriptedModelServer([tool_call(code), text("done")]) as server:
        events = await scenario(server)
    [edited] = of_type(events, ev.FileEdited)
    [started] = of_type(events, ev.CellStarted)
    old = "in the buffer\n" if client_fs else "on disk\n"
    assert edited == ev.FileEdited(
        cell_id=started.cell_id, path=str(target), old_text=old, new_text=old.upper()
    )
    if client_fs:
        assert editor.writes == [(str(target), old.upper())] and target.read_text() == "on disk\n"
    else:
        assert editor.writes == [] and target.read_text() == old.upper()
    names = [type(e).__name__ for e in events]
    assert names.index("CellStarted") < names.index("FileEdited") < names.index("CellFinished")


async def test_prompt_with_image_resource_and_links_reaches_the_model(tmp_path: Path) -> None:
    linked = tmp_path / "spec.md"
    linked.write_text("the spec says 7")
    parts = [
        ev.TextPart("see these"),
        ev.ImagePart("aGVsbG8=", "image/png"),
        ev.ResourcePart("file:///x/a.py", text="A = 1"),
        ev.ResourceLinkPart(linked.as_uri(), "spec.md"),
        ev.ResourceLinkPart("zed://selection/1", "selection"),
    ]

    async def scenario(server: ScriptedModelServer) -> list[ev.TurnEvent]:
        async with running_agent(config_for(tmp_path, server)) as agent:
            session = await agent.new_session(str(tmp_path), NoEditor())
            return await collect(session, parts)

    with ScriptedModelServer([text("seen")]) as server:
        events = await scenario(server)
        content = server.requests[0]["messages"][-1]["content"]
    assert events[-1] == ev.TurnEnded("end_turn")
    kinds = [block["type"] for block in content]
    assert kinds == ["text", "image_url", "text", "text", "text"]
    flat = json.dumps(content)
    assert "the spec says 7" in flat and "A = 1" in flat and "zed://selection/1" in flat


async def test_a_cell_that_kills_the_kernel_fails_and_the_next_cell_gets_a_fresh_kernel(
    tmp_path: Path,
) -> None:
    async def scenario(server: ScriptedModelServer) -> list[ev.TurnEvent]:
        async with running_agent(config_for(tmp_path, server)) as agent:
            session = await agent.new_session(str(tmp_path), NoEditor())
            return await collect(session, "crash it")

    script = [tool_call("import os\nos._exit(1)", "crash"), tool_call("print('back')"), text("recovered")]
    with ScriptedModelServer(script) as server:
        events = await scenario(server)
        told = server.requests[1]["messages"][-1]["content"]
    first, second = of_type(events, ev.CellFinished)
    assert first.status == "failed" and first.error is not None and "kernel died" in first.error
    assert "kernel died" in told
    assert second.status == "completed" and "back" in second.output
    assert events[-1] == ev.TurnEnded("end_turn")


async def test_cancel_also_cancels_a_prompt_queued_behind_the_running_one(tmp_path: Path) -> None:
    async def scenario(server: ScriptedModelServer) -> tuple[list[ev.TurnEvent], list[ev.TurnEvent]]:
        async with running_agent(config_for(tmp_path, server)) as agent:
            session = await agent.new_session(str(tmp_path), NoEditor())
            chunk = asyncio.Event()
            first_events: list[ev.TurnEvent] = []

            async def first() -> None:
                async for event in session.run_turn([ev.TextPart("slow")]):
                    first_events.append(event)
                    chunk.set()

            a = asyncio.create_task(first())
            await asyncio.wait_for(chunk.wait(), 30)
            queued = session.run_turn([ev.TextPart("queued")])  # sent before the cancel

            async def drain() -> list[ev.TurnEvent]:
                return [event async for event in queued]

            b = asyncio.create_task(drain())
            await session.cancel()
            await asyncio.wait_for(a, 10)
            return first_events, await asyncio.wait_for(b, 10)

    with ScriptedModelServer([stall(60, before="working")]) as server:
        first_events, queued = await scenario(server)
        assert len(server.requests) == 1  # the queued prompt never reached the model
    assert first_events[-1] == ev.TurnEnded("cancelled")
    assert queued == [ev.TurnEnded("cancelled")]


async def test_parallel_tool_calls_run_in_order_and_each_gets_its_result(tmp_path: Path) -> None:
    from agent_core.testing import tool_calls

    async def scenario(server: ScriptedModelServer) -> list[ev.TurnEvent]:
        async with running_agent(config_for(tmp_path, server)) as agent:
            session = await agent.new_session(str(tmp_path), NoEditor())
            return await collect(session, "two at once")

    with ScriptedModelServer(
        [tool_calls([("n = 1\nprint(n)", "one"), ("print(n + 1)", "two")], split=3), text("ok")]
    ) as server:
        events = await scenario(server)
        messages = server.requests[1]["messages"]
    assert [s.title for s in of_type(events, ev.CellStarted)] == ["one", "two"]
    call_ids = [c["id"] for c in messages[-3]["tool_calls"]]
    assert [(m["tool_call_id"], m["content"]) for m in messages[-2:]] == [
        (call_ids[0], "1\n"),
        (call_ids[1], "2\n"),
    ]


async def test_permission_answered_cancelled_ends_the_turn_cancelled(tmp_path: Path) -> None:
    async def scenario(
        server: ScriptedModelServer, editor: RecordingEditor
    ) -> tuple[list[ev.TurnEvent], list[dict]]:
        async with running_agent(config_for(tmp_path, server)) as agent:
            session = await agent.new_session(str(tmp_path), editor)
            session.set_mode("ask")
            events = await collect(session, "run")
            return events, list(session.messages)

    with ScriptedModelServer([tool_call("print(1)")]) as server:
        events, messages = await scenario(server, RecordingEditor(["cancelled"]))
    assert events[-1] == ev.TurnEnded("cancelled")
    assert of_type(events, ev.CellStarted) == []
    assert messages[-1]["role"] == "tool"  # the call is answered, so the next request stays valid


def test_cell_titles_prefer_the_model_then_a_comment_then_the_first_statement() -> None:
    from agent_core.turn.titles import cell_title

    assert cell_title("x = 1", "  Set x ") == "Set x"
    assert cell_title("\n# load the data\nimport pandas", None) == "load the data"
    assert cell_title("%%bash\nls -la", None) == "ls -la"
    assert cell_title("%%bash", None) == "%%bash"
    assert cell_title("y = " + "1" * 200, None).endswith("…")
    assert len(cell_title("y = " + "1" * 200, None)) == 80


async def test_an_empty_or_reasoning_only_reply_is_said_and_not_kept(tmp_path: Path) -> None:
    async def scenario(server: ScriptedModelServer) -> tuple[list[ev.TurnEvent], list[dict]]:
        async with running_agent(config_for(tmp_path, server)) as agent:
            session = await agent.new_session(str(tmp_path), NoEditor())
            events = await collect(session, "anything?")
            return events, list(session.messages)

    with ScriptedModelServer([reasoning("only thinking")]) as server:
        events, messages = await scenario(server)
    assert "empty answer" in "".join(m.text for m in of_type(events, ev.MessageChunk))
    assert [m["role"] for m in messages] == ["user"]
    assert events[-1] == ev.TurnEnded("end_turn")


async def test_tool_calls_without_ids_get_unique_ones(tmp_path: Path) -> None:
    no_id = response(
        [{"tool_call": {"index": 0, "name": "ipython", "arguments": '{"code": "print(5)"}'}}],
        finish_reason="tool_calls",
    )

    async def scenario(server: ScriptedModelServer) -> list[ev.TurnEvent]:
        async with running_agent(config_for(tmp_path, server)) as agent:
            session = await agent.new_session(str(tmp_path), NoEditor())
            return await collect(session, "x")

    with ScriptedModelServer([no_id, no_id, text("ok")]) as server:
        events = await scenario(server)
        messages = server.requests[2]["messages"]
    ids = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert len(ids) == 2 and len(set(ids)) == 2 and all(ids)
    assert [o.text for o in of_type(events, ev.CellOutput)] == ["5\n", "5\n"]


async def test_a_kernel_that_cannot_start_fails_the_cell_readably_and_the_turn_goes_on(
    tmp_path: Path,
) -> None:
    python = tmp_path / "no-such-python"  # there at session/new (the check passes), gone at the cell

    async def scenario(server: ScriptedModelServer) -> tuple[list[ev.TurnEvent], str]:
        python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
        python.chmod(0o755)
        config = config_for(tmp_path, server, kernel_python=str(python))
        async with running_agent(config) as agent:
            session = await agent.new_session(str(tmp_path), NoEditor())
            python.unlink()
            events = await collect(session, "run")
            return events, await session.kernel_status()

    with ScriptedModelServer([tool_call("print(1)"), text("the kernel is broken")]) as server:
        events, status = await scenario(server)
        told = server.requests[1]["messages"][-1]["content"]
    [finished] = of_type(events, ev.CellFinished)
    assert finished.status == "failed" and "could not start" in (finished.error or "")
    assert "no-such-python" in told
    assert status.startswith("failed to start")
    assert events[-1] == ev.TurnEnded("end_turn")


async def test_session_new_with_a_missing_interpreter_fails_at_once_naming_it(tmp_path: Path) -> None:
    config = config_for(tmp_path, None, kernel_python=str(tmp_path / "no-such-python"))
    async with running_agent(config) as agent:
        with pytest.raises(KernelBackendUnavailable, match="no-such-python") as caught:
            await agent.new_session(str(tmp_path), NoEditor())
    assert caught.value.backend == "local"
    assert agent.store.list(None).sessions == []  # nothing half-made on disk


async def test_a_model_that_refuses_images_gets_them_described_for_the_rest_of_the_session(
    tmp_path: Path,
) -> None:
    async def scenario(server: ScriptedModelServer) -> tuple[list[ev.TurnEvent], list[dict]]:
        async with running_agent(config_for(tmp_path, server)) as agent:
            session = await agent.new_session(str(tmp_path), NoEditor())
            events = await collect(session, [ev.TextPart("what is this?"), ev.ImagePart("aGk=", "image/png")])
            events += await collect(session, [ev.TextPart("and this?"), ev.ImagePart("aGk=", "image/png")])
            return events, agent.store.load(session.id).messages

    refused = error(400, "Invalid content type. image_url is only supported by certain models.")
    with ScriptedModelServer([refused, text("I cannot see it"), text("still cannot")]) as server:
        events, reloaded = await scenario(server)
        retried, second = server.requests[1], server.requests[2]
    assert len(of_type(events, ev.TurnEnded)) == 2
    for request in (retried, second):
        assert "image_url" not in json.dumps(request["messages"])
        assert "cannot see images" in json.dumps(request["messages"])
    assert "image_url" not in json.dumps(reloaded)  # the transcript rebuilds the image-free context
