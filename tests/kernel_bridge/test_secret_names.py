"""`is_secret` reads SECRET_PATTERNS as plain string tests: it must say exactly what `fnmatch` says."""

from __future__ import annotations

import fnmatch

from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_bridge.environment import SECRET_PATTERNS, is_secret

# Names built from the patterns' own pieces, so near misses (a piece at the start, in the middle,
# doubled, lower case, a character short) come up often.
PIECES = sorted({p.strip("*") for p in SECRET_PATTERNS} | {"_", "X", "KEY", "api", "token", "SECRE", "T"})


def fnmatch_secret(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name.upper(), pattern) for pattern in SECRET_PATTERNS)


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=5).map("".join) | st.text(max_size=12))
def test_a_name_is_secret_exactly_when_a_secret_pattern_matches_it_as_fnmatch_reads_it(name: str) -> None:
    assert is_secret(name) is fnmatch_secret(name)


def test_the_string_tests_cover_every_pattern_shape() -> None:
    cases = {
        "OPENAI_API_KEY": True,  # exact
        "MY_TOKEN": True,  # *X
        "SECRET_THING": True,  # X*
        "A_SECRET_B": True,  # *X*
        "_SECRET_": True,  # *X* with both stars empty
        "TOKENS": False,
        "SECRETS": False,
        "KEYBOARD_LAYOUT": False,
        "github_token": True,  # names are upper-cased first
    }
    assert {name: is_secret(name) for name in cases} == cases
    assert {name: fnmatch_secret(name) for name in cases} == cases
    assert is_secret("MY_TOKEN", keep={"MY_TOKEN"}) is False
