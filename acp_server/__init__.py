"""acp_server: the ACP stdio surface (transport, methods, updates, slash commands)."""

# The distribution's version (pyproject.toml reads it from here: `[tool.setuptools.dynamic]`).
__version__ = "0.1.0"
