"""The skill check a panel write runs when no open session of this server makes it.

It is the check a session runs (`verifier_for` with the config's `verify_skills`), set up in the
proposing session's working directory so the skill's imports resolve there. A check that cannot be
set up refuses every skill and says why: no skill goes in unchecked (memories and other kinds are
not checked).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from acp_server.panel.sessions import session_cwd

# A store's pre-apply skill verifier (harness_store.verify.PreApplyVerifier: entry -> Verdict).
Verifier = Callable[[Any], Any]
VerifierFactory = Callable[[str, Path], Verifier]


class PanelSkillChecks:
    """`for_session(scope, session_id)`: the verifier for a write into `scope` on that session's behalf.

    `factory` (`(scope, cwd) -> PreApplyVerifier`) defaults to
    `agent_core.trust.skill_check.cli_verifier_factory()`, built on first use."""

    def __init__(self, home: Path, factory: VerifierFactory | None = None) -> None:
        self._home = home
        self._factory = factory

    def for_session(self, scope: str, session_id: str) -> Verifier:
        from agent_core.trust.skill_check import refusing_verifier

        cwd = session_cwd(self._home, session_id)
        if cwd is None or not cwd.is_dir():
            return refusing_verifier(
                f"the skill check needs the session's working directory ({cwd or 'not recorded'}), which is not there"
            )
        try:
            if self._factory is None:
                from agent_core.trust.skill_check import cli_verifier_factory

                self._factory = cli_verifier_factory()
            return self._factory(scope, cwd)
        except Exception as exc:  # a bad config.toml: no skill goes in unchecked
            return refusing_verifier(f"the skill check could not be set up: {exc}")
