"""Slash commands: parsing, the runner, /kernel, /compact, /fork, /rewind, ..."""
