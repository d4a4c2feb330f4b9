"""The rule that reads a user's prompt as a correction of the previous turn."""

from __future__ import annotations

import pytest

from agent_core.trust.correction import reads_as_correction


@pytest.mark.parametrize(
    "prompt",
    [
        "No, that's not the file I meant",
        "no.",
        "Wrong: the tests live in tests/unit",
        "Undo",
        "revert the last change please",
        "Don't touch the lock file",
        "do not use pip here",
        "Nope",
        "That\u2019s wrong, use make check",
        "Thanks, but this is not what I asked for",
        "  hmm, you broke the build",
        "That didn't work either",
        "> not what I wanted",
    ],
)
def test_a_prompt_that_rejects_the_previous_turn_reads_as_a_correction(prompt: str) -> None:
    assert reads_as_correction(prompt)


@pytest.mark.parametrize(
    "prompt",
    [
        "",
        "No tests exist yet; add some",
        "Now run the linter",
        "Undone tasks are listed in TODO.md",
        "Add a revert command to the CLI",
        "Nothing is wrongly named here",
        "Do the next step",
        "Knowing that, what next?",
    ],
)
def test_a_request_is_not_read_as_a_correction(prompt: str) -> None:
    assert not reads_as_correction(prompt)
