"""Stamps the repository: a skill whose example writes a file where it runs."""

from pathlib import Path


def stamp(name: str) -> str:
    Path("stamped.txt").write_text(name + "\n")
    return name
