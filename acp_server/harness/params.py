"""Typed params of the `_harness/*` extension methods, which `acp.schema` has no models for.

One pydantic model per method, each with the `sessionId` every method takes; `read` validates a
request's params into its method's model, answering -32602 with the message that names the field
and what it must be (and the pydantic errors in `data`). Imported on the first `_harness/*`
request, never at startup (pydantic is not loaded on the `initialize` path).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
)

from acp_server.harness.state_pages import DEFAULT_LIMIT, MAX_LIMIT
from acp_server.protocol.errors import AcpError
from agent_core.refinement.surface import KINDS

JsonObject = dict[str, object]
Id = Annotated[StrictStr, Field(min_length=1)]
MAX_AWAIT_MS = 3_600_000


class HarnessParams(BaseModel):
    """What every `_harness/*` method takes: the session it asks about."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    # Wire name -> what its value must be, said in the refusal `<method>: <name> <must>`; a field
    # not listed (the ids) is refused as `Invalid params for <method>: <name>: must be a non-empty string`.
    MUST: ClassVar[dict[str, str]] = {}

    session_id: Id = Field(alias="sessionId")


class StateParams(HarnessParams):
    MUST: ClassVar[dict[str, str]] = {
        "scope": "must be local, global, project or merged",
        "asOf": "must be a refinement id",
        "limit": f"must be an integer from 1 to {MAX_LIMIT}",
        "cursor": "must be the nextCursor of an earlier answer",
        "kind": f"must be one of {', '.join(KINDS)}",
    }
    scope: Literal["local", "global", "project", "merged"] = "merged"
    as_of: StrictStr | None = Field(None, alias="asOf")
    # One page at a time: a 10,000-entry harness whole is megabytes; `nextCursor` leads on.
    limit: StrictInt = Field(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)
    cursor: StrictStr | None = Field(None, max_length=4096)
    kind: StrictStr | None = None

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str | None) -> str | None:
        if value is not None and value not in KINDS:
            raise ValueError("unknown kind")
        return value


class HistoryParams(HarnessParams):
    MUST: ClassVar[dict[str, str]] = {
        "limit": "must be a positive integer",
        "cursor": "must be a refinement id",
    }
    limit: StrictInt = Field(50, ge=1)
    cursor: StrictStr | None = None


class ShowParams(HarnessParams):
    refinement_id: Id = Field(alias="refinementId")


class RollbackParams(HarnessParams):
    MUST: ClassVar[dict[str, str]] = {"force": "must be a boolean"}
    refinement_id: Id = Field(alias="refinementId")
    force: StrictBool = False


class ReviewParams(HarnessParams):
    MUST: ClassVar[dict[str, str]] = {
        "decision": "must be apply, reject or reject_forever",
        "editIds": "must be a list of entry ids",
    }
    proposal_id: Id = Field(alias="proposalId")
    # `apply_always` too: the review card's "apply, and always for this kind" choice.
    decision: Literal["apply", "apply_always", "reject", "reject_forever"]
    edit_ids: list[StrictStr] | None = Field(None, alias="editIds")


class WhyParams(HarnessParams):
    MUST: ClassVar[dict[str, str]] = {"kind": f"must be one of {', '.join(KINDS)}"}
    entry_id: Id = Field(alias="entryId")
    kind: StrictStr | None = None

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str | None) -> str | None:
        if value is not None and value not in KINDS:
            raise ValueError("unknown kind")
        return value


class StatusParams(HarnessParams):
    pass


class AwaitQuiescenceParams(HarnessParams):
    MUST: ClassVar[dict[str, str]] = {"timeoutMs": "must be a non-negative number"}
    timeout_ms: StrictInt | StrictFloat = Field(30_000, alias="timeoutMs", ge=0)

    @field_validator("timeout_ms", mode="before")
    @classmethod
    def _not_a_bool(cls, value: object) -> object:
        if isinstance(value, bool):  # a JSON true is not a number of milliseconds
            raise ValueError("must be a number")
        return value

    @property
    def timeout(self) -> float:
        """The wait in seconds, capped at an hour."""
        return min(float(self.timeout_ms), MAX_AWAIT_MS) / 1000.0


MODELS: dict[str, type[HarnessParams]] = {
    "_harness/state": StateParams,
    "_harness/history": HistoryParams,
    "_harness/show": ShowParams,
    "_harness/rollback": RollbackParams,
    "_harness/review": ReviewParams,
    "_harness/why": WhyParams,
    "_harness/status": StatusParams,
    "_harness/await_quiescence": AwaitQuiescenceParams,
}


def read(method: str, params: JsonObject) -> HarnessParams:
    """`params` as `method`'s model, or -32602 naming the first bad field and what it must be."""
    model = MODELS[method]
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        errors = [
            {"loc": [str(part) for part in e["loc"]], "msg": e["msg"], "type": e["type"]}
            for e in exc.errors(include_url=False, include_context=False, include_input=False)
        ]
        key = errors[0]["loc"][0] if errors and errors[0]["loc"] else "params"
        must = model.MUST.get(str(key))
        if must is None:
            message = f"Invalid params for {method}: {key}: must be a non-empty string"
        else:
            message = f"{method}: {key} {must}"
        raise AcpError.invalid_params(message, errors) from None
