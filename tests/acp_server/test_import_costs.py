"""`without_field_docstrings`: the wire models load without pydantic's docstring pass, and only they."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

MODEL = '''
from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)
    size: int
    """How big."""
'''


def run(code: str, cwd: Path | None = None) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True, cwd=cwd
    )
    return out.stdout.splitlines()


def test_only_the_named_modules_models_lose_their_field_docstrings_and_validation_is_unchanged(
    tmp_path: Path,
) -> None:
    for name in ("wire_models", "other_models", "late_models"):
        (tmp_path / f"{name}.py").write_text(MODEL, encoding="utf-8")
    lines = run(
        """
        import sys
        sys.path.insert(0, ".")
        from acp_server.process.import_costs import without_field_docstrings

        with without_field_docstrings("wire_models"):
            from wire_models import Model as skipped
            from other_models import Model as kept
        from late_models import Model as after
        print(skipped.model_fields["size"].description, kept.model_fields["size"].description,
              after.model_fields["size"].description)
        print(skipped.model_validate({"size": 3}).size)
        try:
            skipped.model_validate({"size": "big"})
        except Exception as exc:
            print(type(exc).__name__)
        """,
        cwd=tmp_path,
    )
    assert lines == ["None How big. How big.", "3", "ValidationError"]


def test_the_wire_models_import_without_field_descriptions_and_pydantic_is_restored() -> None:
    lines = run(
        """
        from acp_server.protocol import wire
        from pydantic._internal import _fields
        before = _fields._update_fields_from_docstrings
        module = wire._import_now()
        print(module.PromptRequest.model_fields["prompt"].description)
        print(_fields._update_fields_from_docstrings is before)
        """
    )
    assert lines == ["None", "True"]
