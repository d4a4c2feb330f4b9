"""The turn records (agent_core.events) build `__repr__`, `__eq__` and `__hash__` from closures: each
must answer as the method `@dataclass(frozen=True)` would write for the same class."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_core import events

RECORDS = sorted(
    (v for v in vars(events).values() if isinstance(v, type) and dataclasses.is_dataclass(v)),
    key=lambda cls: cls.__name__,
)


def twin(cls: type) -> type:
    """The same class made by the stock `@dataclass(frozen=True)`."""
    namespace: dict[str, Any] = {
        "__annotations__": dict(cls.__annotations__),
        "__qualname__": cls.__qualname__,
    }
    for f in dataclasses.fields(cls):
        namespace[f.name] = dataclasses.field(
            default=f.default, default_factory=f.default_factory, repr=f.repr, hash=f.hash, compare=f.compare
        )
    return dataclasses.dataclass(frozen=True)(type(cls.__name__, (), namespace))


TWINS = {cls: twin(cls) for cls in RECORDS}
VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["", "a", "é'\""]), st.just(math.nan)
)


def test_every_record_in_events_is_built_by_the_shared_record_methods() -> None:
    assert len(RECORDS) >= 26
    for cls in RECORDS:
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
        assert cls.__eq__.__qualname__ == f"{cls.__qualname__}.__eq__"


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(RECORDS), st.data())
def test_repr_eq_and_hash_answer_as_the_stock_frozen_dataclass(cls: type, data: st.DataObject) -> None:
    names = [f.name for f in dataclasses.fields(cls)]
    a_args = {name: data.draw(VALUES) for name in names}
    b_args = {name: data.draw(st.sampled_from([a_args[name], data.draw(VALUES)])) for name in names}
    a, b, ta, tb = cls(**a_args), cls(**b_args), TWINS[cls](**a_args), TWINS[cls](**b_args)
    assert repr(a) == repr(ta)
    assert (a == b) is (ta == tb)
    assert (a != b) is (ta != tb)
    assert a == a  # the same nan object inside: equal, as the tuple comparison says
    assert hash(a) == hash(ta)
    assert a.__eq__(ta) is NotImplemented and (a == ta) is False  # another class never equals
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(a, names[0], 1)


def test_a_record_that_contains_itself_shows_three_dots_as_dataclass_does() -> None:
    inner: list[Any] = []
    chunk = events.MessageChunk(inner, "m")  # type: ignore[arg-type]
    inner.append(chunk)
    twin_inner: list[Any] = []
    twin_chunk = TWINS[events.MessageChunk](twin_inner, "m")
    twin_inner.append(twin_chunk)
    assert repr(chunk) == repr(twin_chunk) == "MessageChunk(text=[...], message_id='m')"
