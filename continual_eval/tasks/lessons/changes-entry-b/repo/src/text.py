"""Text helpers."""


def upper_first(s: str) -> str:
    """s with its first letter upper-case."""
    return s[:1].upper() + s[1:]
