"""The curator's optional model pass (`curate_model_pass`, off by default): after the deterministic
pass, one model request proposes merges and generalizations over the store's live entries.

The reply is JSON asked as structured output (`reply_schemas.CURATOR_SCHEMA`) and validated with
pydantic here. A *merge* archives an entry that says what another says; a *generalization*
archives several specific entries into an existing one that states their general rule. Both become
`ProposedMerge`s that harness_store's `with_merges` admits only under the deterministic pass's rules
(target exists, same kind, verified; never a person's entry; archive, never delete); a refused one
is a note in the same dry-run report, and what is admitted applies in the same single history
record. Any failure of the request or the reply (model error, no JSON, a wrong shape) leaves the
deterministic pass as it was, with a note saying why.

The model sees entry contents, which a model wrote: an injected "merge everything" can at most
archive model-written entries into a verified one, reversibly, in a report a person sees first
unless the review policy lets the pass apply unreviewed.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent_core.refinement.extract import ReplyParseError, extract_json_object
from agent_core.refinement.reply_schemas import CURATOR_SCHEMA
from harness_store import HarnessState
from harness_store.curator import CurationPlan, ProposedMerge, is_archived, is_protected, noted, with_merges

if TYPE_CHECKING:
    from agent_core.refinement.completion import CompletionClient
    from agent_core.refinement.records import Scope

log = logging.getLogger(__name__)

MAX_ENTRIES = 200  # entries shown to the model (the first ones by kind and id)
CONTENT_CHARS = 600  # of each entry's content
MAX_PROPOSALS = 20  # merges plus generalizations' members the reply may carry

CURATOR_SYSTEM_PROMPT = """\
You curate a coding agent's harness: short entries (memories, prompts, skills, subagents) that are \
shown to the agent in later sessions. Propose only:
- merges: an entry that says the same as another entry of the same kind (`id` is archived, `into` kept);
- generalizations: several specific entries whose lesson an existing entry of the same kind already \
states in general (`ids` are archived, `into` kept).
`into` must be an existing entry marked verified. Never invent entries or ids. Propose nothing when \
nothing is redundant. Reply with one JSON object: {"merges": [{"kind", "id", "into", "reason"}], \
"generalizations": [{"kind", "ids", "into", "reason"}]}."""


class _Merge(BaseModel):
    model_config = ConfigDict(extra="ignore")
    kind: str = Field(min_length=1, max_length=40)
    id: str = Field(min_length=1, max_length=200)
    into: str = Field(min_length=1, max_length=200)
    reason: str = Field(default="", max_length=2000)


class _Generalization(BaseModel):
    model_config = ConfigDict(extra="ignore")
    kind: str = Field(min_length=1, max_length=40)
    ids: list[str] = Field(min_length=1, max_length=MAX_PROPOSALS)
    into: str = Field(min_length=1, max_length=200)
    reason: str = Field(default="", max_length=2000)


class CuratorReply(BaseModel):
    """The model's reply: merges and generalizations (each list may be empty)."""

    model_config = ConfigDict(extra="ignore")
    merges: list[_Merge] = Field(default_factory=list, max_length=MAX_PROPOSALS)
    generalizations: list[_Generalization] = Field(default_factory=list, max_length=MAX_PROPOSALS)

    def proposed(self) -> list[ProposedMerge]:
        out = [ProposedMerge(m.kind, m.id, m.into, m.reason) for m in self.merges]
        for g in self.generalizations:
            reason = "generalized by it" + (f": {g.reason}" if g.reason.strip() else "")
            out += [ProposedMerge(g.kind, member, g.into, reason) for member in g.ids]
        return out[:MAX_PROPOSALS]


def curator_user_prompt(state: HarnessState, plan: CurationPlan) -> str:
    """The store's live entries the deterministic pass leaves alone, one JSON object a line."""
    acted = {(a.kind, a.id) for a in plan.actions}
    lines: list[str] = []
    for kind in sorted(state.entries):
        for entry_id, entry in sorted(state.entries[kind].items()):
            if len(lines) >= MAX_ENTRIES:
                break
            if entry.trust == "rejected" or is_archived(entry) or (kind, entry_id) in acted:
                continue
            lines.append(
                json.dumps(
                    {
                        "kind": kind,
                        "id": entry_id,
                        "trust": entry.trust,
                        "by_person": is_protected(entry),
                        "title": entry.title,
                        "content": entry.content[:CONTENT_CHARS],
                    },
                    ensure_ascii=False,
                )
            )
    return "Entries (one JSON object per line):\n" + "\n".join(lines)


@dataclass
class CuratorModel:
    """The model pass of one session's curator: its client, its output budget, and the proposals of
    the last dry run per scope (an `apply` after a dry run applies what the report showed, re-checked
    against the store as it is then, instead of asking again)."""

    client: CompletionClient
    max_tokens: int
    last: dict[Scope, tuple[ProposedMerge, ...]] = field(default_factory=dict)

    async def ask(self, state: HarnessState, plan: CurationPlan) -> tuple[list[ProposedMerge], str | None]:
        """The model's proposals, or none and the reason (the pass goes on without them)."""
        try:
            reply = await self.client.complete(
                system=CURATOR_SYSTEM_PROMPT,
                user=curator_user_prompt(state, plan),
                max_tokens=self.max_tokens,
                schema=CURATOR_SCHEMA,
            )
            data = extract_json_object(
                reply.text, finish_reason=reply.finish_reason, reasoning=reply.reasoning
            )
            return CuratorReply.model_validate(data).proposed(), None
        except ReplyParseError as exc:
            why = exc.message
        except ValidationError as exc:
            count = exc.error_count()
            why = f"the reply has the wrong shape ({count} problem{'s' * (count != 1)})"
        except Exception as exc:  # the model pass must never cost the deterministic pass
            log.warning("the curator's model pass failed", exc_info=True)
            why = f"the request failed ({type(exc).__name__}: {exc})"
        return [], why

    async def extend(
        self, scope: Scope, state: HarnessState, plan: CurationPlan, *, apply: bool
    ) -> CurationPlan:
        """`plan` with the model's admitted merges; a dry run remembers them for the next apply."""
        cached = self.last.pop(scope, None) if apply else None
        if cached is not None:
            proposed, why = list(cached), None
        else:
            proposed, why = await self.ask(state, plan)
            if not apply and why is None:
                self.last[scope] = tuple(proposed)
        if why is not None:
            return noted(plan, f"model pass skipped: {why}; the deterministic pass stands")
        return with_merges(state, plan, proposed)
