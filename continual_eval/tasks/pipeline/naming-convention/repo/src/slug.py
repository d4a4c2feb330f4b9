"""URL slugs."""


def slugify(text: str) -> str:
    """Lower-case words joined by dashes."""
    return "-".join(text.lower().split())
