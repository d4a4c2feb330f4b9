"""Gates run as real processes: exit codes, live bounded output, timeouts and cancel kill the group."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from agent_core.autonomy import Gate, run_gate, runner
from kernel_bridge import group_watch

pytestmark = pytest.mark.anyio


async def _wait_gone(pid: int, deadline: float = 5.0) -> bool:
    """True once `pid` has exited: a pidfd becomes readable at the exit of any process, child or not."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    loop = asyncio.get_running_loop()
    exited = asyncio.Event()
    loop.add_reader(fd, exited.set)
    try:
        await asyncio.wait_for(exited.wait(), deadline)
        return True
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(fd)
        os.close(fd)


async def test_a_passing_gate_reports_exit_code_zero_and_its_output(tmp_path: Path) -> None:
    result = await run_gate(Gate("echo hello; echo oops >&2"), str(tmp_path))
    assert result.passed
    assert result.exit_code == 0
    assert "hello" in result.output and "oops" in result.output


async def test_a_failing_gate_reports_its_exit_code(tmp_path: Path) -> None:
    result = await run_gate(Gate("exit 3"), str(tmp_path))
    assert not result.passed
    assert result.exit_code == 3
    assert result.summary() == "failed (exit code 3)"


async def test_a_gate_runs_in_the_given_directory_with_the_given_environment(tmp_path: Path) -> None:
    result = await run_gate(
        Gate('pwd; echo "v=$GATE_VAR"'), str(tmp_path), env={"GATE_VAR": "x", "PATH": os.environ["PATH"]}
    )
    assert result.output.splitlines() == [str(tmp_path), "v=x"]


async def test_gate_output_streams_while_the_gate_runs(tmp_path: Path) -> None:
    marker = tmp_path / "go"
    seen: list[str] = []
    got_first = asyncio.Event()

    def on_output(text: str) -> None:
        seen.append(text)
        got_first.set()

    cmd = f"echo first; while [ ! -e {marker} ]; do sleep 0.01; done; echo second"
    task = asyncio.create_task(run_gate(Gate(cmd, timeout=30), str(tmp_path), on_output=on_output))
    await asyncio.wait_for(got_first.wait(), 10)
    assert "".join(seen) == "first\n"  # the gate is still running: output arrived live
    marker.touch()
    result = await task
    assert result.output == "first\nsecond\n"


async def test_huge_output_is_bounded_keeping_head_and_tail(tmp_path: Path) -> None:
    cmd = "echo START; yes middle | head -c 2000000; echo; echo END"
    result = await run_gate(Gate(cmd), str(tmp_path))
    assert result.output.startswith("START")
    assert result.output.rstrip().endswith("END")
    assert "characters omitted" in result.output
    assert len(result.output) < runner.HEAD_CHARS + runner.TAIL_CHARS + 200


async def test_a_gate_past_its_timeout_is_killed_with_its_children(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    cmd = f"sleep 300 & echo $! > {pidfile}; wait"
    result = await run_gate(Gate(cmd, timeout=1.0), str(tmp_path))
    assert result.timed_out
    assert result.exit_code is None
    assert await _wait_gone(int(pidfile.read_text()))


async def test_cancelling_a_gate_kills_its_process_group(tmp_path: Path) -> None:
    printed: list[str] = []
    started = asyncio.Event()

    def on_output(text: str) -> None:
        printed.append(text)
        if "\n" in "".join(printed):
            started.set()

    task = asyncio.create_task(
        run_gate(Gate("sleep 300 & echo $!; wait", timeout=60), str(tmp_path), on_output=on_output)
    )
    await asyncio.wait_for(started.wait(), 10)
    child = int("".join(printed).split()[0])
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _wait_gone(child)


async def test_a_gate_that_cannot_start_says_why(tmp_path: Path) -> None:
    result = await run_gate(Gate("true"), str(tmp_path / "missing"))
    assert result.error is not None
    assert result.summary().startswith("could not run")


async def test_a_utf8_character_split_across_reads_survives(tmp_path: Path) -> None:
    # 65535 ASCII bytes then a 4-byte emoji: the read boundary falls inside the character.
    cmd = "python3 -c \"import sys; sys.stdout.buffer.write(b'a'*65535 + '\\U0001F600'.encode())\""
    result = await run_gate(Gate(cmd), str(tmp_path))
    assert "\U0001f600" in result.output
    assert "\ufffd" not in result.output


async def test_a_gate_dies_with_the_server_when_the_server_is_sigkilled(tmp_path: Path) -> None:
    """A stand-in server process runs a gate; SIGKILL of it must not leave the gate's children."""
    script = (
        "import asyncio, sys\n"
        "from agent_core.autonomy import Gate, run_gate\n"
        "def out(t):\n"
        "    sys.stdout.write(t); sys.stdout.flush()\n"
        "asyncio.run(run_gate(Gate('sleep 300 & echo $!; wait', timeout=600), '.', on_output=out))\n"
    )
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        cwd=str(tmp_path),
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert server.stdout is not None
    line = await asyncio.wait_for(server.stdout.readline(), 30)
    child = int(line)
    # The gate's group is led by kernel_bridge's group watch, watching the server: it must end it.
    pgid = int(Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[2])
    leader = Path(f"/proc/{pgid}/cmdline").read_bytes().decode().split("\0")
    assert leader[3:6] == [group_watch.script_path(), str(server.pid), "--"]
    server.kill()
    await server.wait()
    assert await _wait_gone(child, deadline=10.0)
