"""Use, not just presence: entries read from a rendered prompt, followed by a cell, or noise."""

from __future__ import annotations

from continual_eval.use import ShownEntry, followed, markers, noise, shown_entries

PROMPT = """You are an agent.

# Harness
## Continual harness

Entries are hints saved from earlier sessions.

### Memories
- **How tests run here** [`how_tests_run_here`]: "Run the tests with `./run-tests --fast`; plain pytest refuses."
- **Be careful** (candidate) [`be_careful`, src]: "Be careful here."
- **How tests run here** [`tests_again`]: "Run the tests with `./run-tests --fast`; plain pytest refuses."

### Skills
- **Release** [`release`] `tools.release.release(version)`: "Cut a release: bump, tag, build dist/."

# Environment
Working directory: /tmp/repo
"""


def test_entries_are_read_from_the_harness_section_as_the_overview_renders_them() -> None:
    entries = shown_entries(PROMPT)
    assert [e.id for e in entries] == ["how_tests_run_here", "be_careful", "tests_again", "release"]
    assert entries[0].content == "Run the tests with `./run-tests --fast`; plain pytest refuses."
    assert entries[3].call == "tools.release.release"
    assert shown_entries("no harness here") == []


def test_an_entry_is_followed_only_when_its_command_call_or_file_is_in_a_cell() -> None:
    tests, careful, _, release = shown_entries(PROMPT)
    assert markers(tests) == ["./run-tests --fast", "./run-tests"]
    assert followed(tests, ["x = 1", "%%bash\n./run-tests   --fast"])
    assert not followed(tests, ["%%bash\npython -m pytest"])
    assert not followed(careful, ["anything at all"])  # nothing to follow: never counted as used
    assert followed(release, ["from tools.release import release\nrelease('1.2')"])
    assert followed(ShownEntry("f", "File", "Never edit gen/schema.py by hand."), ["open('gen/schema.py')"])


def test_content_free_and_duplicate_entries_are_noise_and_the_first_of_equals_is_kept() -> None:
    assert noise(shown_entries(PROMPT)) == ["be_careful", "tests_again"]
    assert noise([ShownEntry("a", "Style", "Use four spaces, never tabs, in every Python file.")]) == []
