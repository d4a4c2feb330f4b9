"""Executing cells on a real kernel: event order, streams, displays, errors, truncation."""

from __future__ import annotations

import base64
import gc
import struct
import time
import tracemalloc
import zlib
from pathlib import Path

import pytest

from kernel_bridge import ClearOutput, Display, Error, Finished, KernelPool, KernelSession, Result, Stream
from kernel_bridge.output import DEFAULT_MAX_FILE_CHARS

pytestmark = pytest.mark.anyio


def _tiny_png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


async def test_events_stream_in_order_and_finished_comes_last(session: KernelSession) -> None:
    code = "print('one')\nfrom IPython.display import display, Markdown\ndisplay(Markdown('**two**'))\n3"
    events = [event async for event in session.execute(code)]
    assert events[0] == Stream("stdout", "one\n")
    assert isinstance(events[1], Display) and events[1].data["text/markdown"] == "**two**"
    assert events[2] == Result({"text/plain": "3"})
    assert isinstance(events[-1], Finished) and events[-1].status == "ok"
    assert len(events) == 4


async def test_stdout_and_stderr_interleave_in_emission_order(session: KernelSession) -> None:
    code = (
        "import sys\n"
        "for i in range(3):\n"
        "    print(f'out{i}', flush=True)\n"
        "    print(f'err{i}', file=sys.stderr, flush=True)\n"
    )
    streams = [e for e in [event async for event in session.execute(code)] if isinstance(e, Stream)]
    assert [(s.name, s.text) for s in streams] == [
        (name, f"{prefix}{i}\n") for i in range(3) for name, prefix in (("stdout", "out"), ("stderr", "err"))
    ]


async def test_png_display_arrives_as_image_png(session: KernelSession) -> None:
    png = _tiny_png()
    code = f"from IPython.display import Image, display\ndisplay(Image(data={png!r}))"
    run = session.execute(code)
    displays = [e for e in [event async for event in run] if isinstance(e, Display)]
    assert len(displays) == 1
    assert base64.b64decode(displays[0].data["image/png"]) == png
    result = await run.result()
    # The bundle's text/plain is the output text; the image itself only travels as the Display.
    assert result.output == "<IPython.core.display.Image object>\n"


async def test_exception_reports_error_with_clean_traceback(session: KernelSession) -> None:
    run = session.execute("def f():\n    raise ValueError('bad value 42')\nf()")
    events = [event async for event in run]
    errors = [e for e in events if isinstance(e, Error)]
    result = await run.result()
    assert result.status == "error"
    assert errors and errors[0].ename == "ValueError" and errors[0].evalue == "bad value 42"
    assert result.error == errors[0]
    assert not any("\x1b[" in line for line in errors[0].traceback)
    assert "bad value 42" in result.output and "f()" in result.output


async def test_syntax_error_is_an_error_result(session: KernelSession) -> None:
    result = await session.execute("def broken(:\n    pass").result()
    assert result.status == "error"
    assert result.error is not None and result.error.ename == "SyntaxError"


async def test_clear_output_is_an_event(session: KernelSession) -> None:
    code = "from IPython.display import clear_output\nprint('x')\nclear_output(wait=True)\nprint('y')"
    events = [event async for event in session.execute(code)]
    assert ClearOutput(wait=True) in events
    assert events.index(ClearOutput(wait=True)) < events.index(Stream("stdout", "y\n"))


async def test_queued_cells_never_overlap(session: KernelSession) -> None:
    first = session.execute("import time\nt_start = time.time()\ntime.sleep(0.3)\nt_end = time.time()")
    second = session.execute("print(time.time() >= t_end)")
    assert (await first.result()).status == "ok"
    result = await second.result()
    assert result.output == "True\n"


async def test_long_output_is_head_tail_truncated_and_complete_on_disk(session: KernelSession) -> None:
    result = await session.execute("print('HEAD' + 'x' * 50_000 + 'TAIL')").result()
    assert result.output.startswith("HEAD")
    assert result.output.rstrip().endswith("TAIL")
    assert f"characters omitted; full output: {result.full_output_path} ...]" in result.output
    assert len(result.output) < 2_400
    assert result.full_output_path.read_text() == "HEAD" + "x" * 50_000 + "TAIL\n"
    assert oct(result.full_output_path.stat().st_mode & 0o777) == "0o600"


async def test_fifty_megabytes_of_output_keeps_bridge_memory_bounded(session: KernelSession) -> None:
    code = "import sys\nfor i in range(50):\n    sys.stdout.write('y' * 1_000_000)\n    sys.stdout.flush()\nprint('END')"
    gc.collect()
    tracemalloc.start()
    try:
        run = session.execute(code)
        result = await run.result()  # nobody iterates: the live buffer must stay capped
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.status == "ok"
    # The file is bounded too: its head and its tail, with the end intact.
    assert DEFAULT_MAX_FILE_CHARS < result.full_output_path.stat().st_size < DEFAULT_MAX_FILE_CHARS + 200
    assert result.full_output_path.read_text(encoding="utf-8").endswith("END\n")
    assert len(result.output) < 2_200 and result.output.rstrip().endswith("END")
    assert run.peak_buffered_chars <= 4 * 1024 * 1024
    assert peak < 30 * 1024 * 1024, f"bridge peaked at {peak / 1e6:.1f} MB while a cell printed 50 MB"
    events = [event async for event in run]
    notices = [e for e in events if isinstance(e, Stream) and "not shown live" in e.text]
    assert notices, "dropped live output must be announced"


async def test_bash_cell_magic_runs_as_an_ordinary_cell(session: KernelSession) -> None:
    result = await session.execute("%%bash\necho from-bash").result()
    assert result.status == "ok"
    assert result.output == "from-bash\n"


async def test_output_flood_while_the_event_loop_is_busy_still_finishes(session: KernelSession) -> None:
    # Regression: with zmq's default receive high-water mark, 3,000 flushed prints while the host's
    # event loop was busy dropped iopub messages, the idle status among them, and the cell hung.
    code = "for i in range(3000):\n    print(f'line {i:05d} ' + 'x' * 2000, flush=True)\nprint('THE END')"
    run = session.execute(code)
    async for event in run:
        if isinstance(event, Stream):
            time.sleep(0.001)  # not a wait: this blocks the loop, like a slow consumer doing real work
    result = await run.result()
    assert result.status == "ok"
    assert result.output.rstrip().endswith("THE END")
    assert result.full_output_path.read_text().count("\n") == 3001


async def test_default_output_dir_is_removed_when_the_session_shuts_down(
    pool: KernelPool, tmp_path: Path
) -> None:
    s = await pool.acquire(cwd=tmp_path)
    result = await s.execute("print('kept until shutdown')").result()
    assert result.full_output_path.read_text() == "kept until shutdown\n"
    await s.shutdown(final_snapshot=False)
    assert not result.full_output_path.parent.exists()


async def test_the_kernel_starts_without_the_debugger_and_a_cell_can_still_import_debugpy(
    session: KernelSession,
) -> None:
    # The launch hides debugpy while ipykernel sets up (no ACP client speaks the debug protocol);
    # nothing of it may stay hidden from the cells.
    code = (
        "import sys\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('debugpy', '_pydevd_bundle')))\n"
        "import debugpy\n"
        "print(debugpy.__name__, hasattr(debugpy, 'listen'))\n"
    )
    events = [event async for event in session.execute(code)]
    text = "".join(e.text for e in events if isinstance(e, Stream) and e.name == "stdout")
    assert text == "[]\ndebugpy True\n"
    assert isinstance(events[-1], Finished) and events[-1].status == "ok"
