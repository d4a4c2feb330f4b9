"""Cell cards over stdio: terminal output shown once, tracebacks of failed cells, markdown and HTML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp_helpers import ClientFactory, final_card, initialize, new_session, prompt, texts

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call


def run_cell(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path, code: str, **capabilities: object
) -> dict[str, Any]:
    """Run one cell; the final update of its card."""
    model.push(tool_call(code, title="cell"), text("done"))
    client = spawn(model.base_url)
    initialize(client, **capabilities)
    sid, _ = new_session(client, str(tmp_path))
    assert prompt(client, sid, "run it")[0] == "end_turn"
    _, updates = final_card(client, sid)
    return updates[-1]


def test_with_the_terminal_trio_the_output_is_not_repeated_as_text(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    final = run_cell(
        spawn,
        model,
        tmp_path,
        "print('SHOWN' + '-ONCE')\nraise ValueError('boom')",
        _meta={"terminal_output": True},
    )
    assert any(b["type"] == "terminal" for b in final["content"])
    shown = texts(final["content"])
    assert "print('SHOWN' + '-ONCE')" in shown  # the code block stays
    assert "SHOWN-ONCE" not in shown  # the output went to the terminal only
    assert "Error: ValueError: boom" in shown


def test_a_failed_cell_card_shows_the_traceback_without_colour_codes(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    code = "def inner():\n    raise ValueError('boom')\n\ndef outer():\n    inner()\n\nouter()"
    final = run_cell(spawn, model, tmp_path, code)
    assert final["status"] == "failed"
    shown = texts(final["content"])
    assert "inner()" in shown.split("```python", 1)[1].split("```", 1)[1]  # the traceback, after the code
    assert "Traceback" in shown or "----> " in shown
    assert "\x1b[" not in shown
    assert "Error: ValueError: boom" in shown


def test_markdown_display_is_shown_as_markdown_and_default_html_repr_is_not_shown(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    code = (
        "from IPython.display import HTML, Markdown, display\n"
        "display(Markdown('# Big title'))\n"
        "display(HTML('<table><tr><td>cell-text</td></tr></table>'))"
    )
    final = run_cell(spawn, model, tmp_path, code)
    blocks = [b["content"]["text"] for b in final["content"] if b.get("type") == "content"]
    assert "# Big title" in blocks  # its own (markdown) block, not fenced as plain output
    shown = texts(final["content"])
    assert "<IPython.core.display.HTML object>" not in shown
    assert "cell-text" in shown  # the HTML's own text stands in for the uninformative repr


def test_truncated_cell_output_names_the_session_file_that_keeps_all_of_it(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    model.push(tool_call("print('HEAD' + 'x' * 60_000 + 'TAIL')", title="cell"), text("done"))
    client = spawn(model.base_url)
    initialize(client)
    sid, _ = new_session(client, str(tmp_path))
    assert prompt(client, sid, "print a lot")[0] == "end_turn"
    # The model's second request carries the cell's result: truncated, naming the full file.
    tool_results = [m["content"] for m in model.requests[1]["messages"] if m.get("role") == "tool"]
    shown = str(tool_results[-1])
    assert "characters omitted; full output: " in shown
    named = Path(shown.split("full output: ", 1)[1].split(" ...]", 1)[0])
    cells = tmp_path / "home0" / "sessions" / sid / "cells"
    assert named.parent == cells  # kept with the session, not in a temp dir removed at shutdown
    assert oct(cells.stat().st_mode & 0o777) == "0o700"
    assert client.close() == 0
    assert named.read_text() == "HEAD" + "x" * 60_000 + "TAIL\n"  # still there after the server exited
