"""Finding the runnable block of an answer (the text action format's one parsing rule)."""

from __future__ import annotations

import pytest

from agent_core.turn.text_actions import FormatMemory, configured_format, find_action, tools_refused


def test_the_first_python_block_is_the_action() -> None:
    answer = "a\n```python\nprint(1)\n```\nb\n```python\nprint(2)\n```"
    action = find_action(answer)
    assert action is not None and action.code == "print(1)"


@pytest.mark.parametrize("info", ["python", "py", "Python3", "py title=x", "python {.numberLines}"])
def test_info_strings_starting_with_python_or_py_are_runnable(info: str) -> None:
    action = find_action(f"```{info}\nx = 1\n```")
    assert action is not None and action.code == "x = 1"


@pytest.mark.parametrize("info", ["", "bash", "sh", "json", "text", "console"])
def test_blocks_in_other_languages_are_not_runnable(info: str) -> None:
    assert find_action(f"```{info}\nx = 1\n```") is None


def test_a_python_block_after_a_block_in_another_language_is_found() -> None:
    action = find_action("```bash\nls\n```\n\n```python\nimport os\n```")
    assert action is not None and action.code == "import os"


def test_a_block_still_open_at_the_end_of_the_answer_is_runnable() -> None:
    action = find_action("Here:\n```python\nprint('cut')\n")
    assert action is not None and action.code == "print('cut')"


def test_a_tilde_fence_may_contain_backtick_lines() -> None:
    action = find_action("~~~python\ns = '''\n```\n'''\n~~~")
    assert action is not None and action.code == "s = '''\n```\n'''"


def test_a_bash_cell_magic_is_kept_as_the_first_line() -> None:
    action = find_action("```python\n%%bash\nls -la\n```")
    assert action is not None and action.code.splitlines()[0] == "%%bash"


def test_an_empty_python_block_is_not_an_action() -> None:
    assert find_action("```python\n\n```") is None


def test_an_unknown_action_format_is_refused_with_its_name() -> None:
    with pytest.raises(
        ValueError, match=r"^setting action_format = 'json' .* it must be 'auto' or 'tools' or 'text'$"
    ):
        configured_format({"action_format": "json"})


def test_a_400_naming_tools_counts_as_tools_refused_but_other_errors_do_not() -> None:
    assert tools_refused(400, "tools param requires --jinja flag")
    assert not tools_refused(400, "model not found")
    assert not tools_refused(500, "tool server crashed")


def test_one_native_tool_call_rules_out_guessing_text_for_that_model() -> None:
    memory = FormatMemory()
    memory.saw_tool_call("http://x/v1", "m")
    assert not memory.may_guess_text("auto", "http://x/v1", "m")
    assert memory.may_guess_text("auto", "http://x/v1", "other")
