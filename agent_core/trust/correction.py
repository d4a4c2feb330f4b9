"""Whether a user's prompt reads as a correction of the previous turn: a deterministic rule.

The rule is deliberately small and readable, not a classifier. After the text is lower-cased, its
apostrophes straightened and its whitespace collapsed, a prompt is a correction when

* it **starts** with one of `OPENERS` as a whole word or phrase (`no,` needs its punctuation:
  "no tests exist yet" is a request, "no, not that file" a correction), or
* it **contains** one of `PHRASES` anywhere (phrases long enough not to occur by accident in a
  request: "that's wrong", "not what I asked").

A false positive costs little: the previous turn's followed entries get one `corrected` outcome
(entry_counters.py), one bad turn among their others; a single one never makes an entry harmful.
"""

from __future__ import annotations

import re

# A prompt starting with one of these (then a non-word character or the end) corrects the turn.
OPENERS: tuple[str, ...] = (
    "wrong",
    "undo",
    "revert",
    "don't",
    "do not",
    "nope",
    "that's not",
    "that is not",
    "this is not",
    "this isn't",
    "that isn't",
    "not what",
    "incorrect",
)
# "no" opens a correction only with punctuation after it ("no, ...", "no.", "no!").
NO_OPENER = re.compile(r"^no\s*[,.!;:]")
# A prompt containing one of these anywhere corrects the turn.
PHRASES: tuple[str, ...] = (
    "that's wrong",
    "that is wrong",
    "this is wrong",
    "not what i asked",
    "not what i wanted",
    "not what i meant",
    "that's not right",
    "that is not right",
    "you broke",
    "undo that",
    "undo this",
    "revert that",
    "revert this",
    "roll that back",
    "that didn't work",
    "that did not work",
)
_SPACE = re.compile(r"\s+")
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "`": "'"})


def normalized(text: str) -> str:
    """Lower-case, straight apostrophes, one space between words, no leading punctuation."""
    return _SPACE.sub(" ", text.translate(_QUOTES).lower()).strip().lstrip("\"'*>-_ ")


def reads_as_correction(text: str) -> bool:
    """True when the prompt `text` reads as a correction of the previous turn (module docstring)."""
    said = normalized(text)
    if not said:
        return False
    if NO_OPENER.match(said):
        return True
    for opener in OPENERS:
        if said.startswith(opener) and (len(said) == len(opener) or not _word_char(said[len(opener)])):
            return True
    return any(phrase in said for phrase in PHRASES)


def _word_char(char: str) -> bool:
    return char.isalnum() or char == "_"
