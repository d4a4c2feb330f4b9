"""The referee's defaults (the rows `test_patterns` and `runner_files` of config/table.py, read by
control_plane/settings.py and the autonomous loop's tamper evidence)."""

from __future__ import annotations

# What looks like a test or CI config to the tamper evidence of a gates' pass (agent_core.autonomy).
DEFAULT_TEST_PATTERNS = (
    "tests/**",
    "test/**",
    "test_*.py",
    "*_test.*",
    "*.spec.*",
    "conftest.py",
    ".github/workflows/**",
    ".gitlab-ci.yml",
    ".circleci/**",
    ".ci/**",
    "tox.ini",
    "noxfile.py",
    "pytest.ini",
    "Jenkinsfile",
    "azure-pipelines.yml",
)

# Files that change what a test runner runs without being tests: a change to one during an
# autonomous loop counts as a protected-path change (`protect_runner_files`), at any depth.
DEFAULT_RUNNER_FILES = (
    "conftest.py",
    "pytest.ini",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
    "sitecustomize.py",
    "usercustomize.py",
    "*.pth",
    "pytest.py",
    "pytest/**",
    "_pytest/**",
)
