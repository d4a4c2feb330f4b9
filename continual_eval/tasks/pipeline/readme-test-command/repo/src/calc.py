"""A tiny calculator."""


def add(a: int, b: int) -> int:
    """The sum of a and b."""
    return abs(a) + abs(b)
