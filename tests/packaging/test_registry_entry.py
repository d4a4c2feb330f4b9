"""The ACP registry entry (`registry/continual-acp/`): schema, the registry's own rules, the icon."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import jsonschema
import pytest
from icon_rules import icon_problems

from acp_server import __version__

ROOT = Path(__file__).resolve().parents[2]
ENTRY = ROOT / "registry" / "continual-acp"
SCHEMA = json.loads((Path(__file__).with_name("registry_agent.schema.json")).read_text())
AGENT = json.loads((ENTRY / "agent.json").read_text())
ICON = (ENTRY / "icon.svg").read_text()


def test_agent_json_validates_against_the_registry_schema() -> None:
    jsonschema.Draft7Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(AGENT)


def test_the_schema_check_can_fail() -> None:
    broken = {**AGENT, "distribution": {"uvx": {"package": "continual-acp==0.1.0", "command": "x"}}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, SCHEMA)


def test_the_id_is_the_directory_name_and_a_registry_id() -> None:
    assert AGENT["id"] == ENTRY.name
    assert re.fullmatch(r"[a-z][a-z0-9-]*", AGENT["id"])


def test_the_entry_pins_this_package_at_this_version_and_serves() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert AGENT["version"] == __version__
    assert AGENT["distribution"] == {
        "uvx": {"package": f"{project['name']}=={__version__}", "args": ["serve"]}
    }
    # `uvx <package> serve` runs the console script named like the package.
    assert project["name"] in project["scripts"]
    assert AGENT["license"] == project["license"]


def test_the_icon_passes_the_registry_icon_rules() -> None:
    assert icon_problems(ICON) == []


GOOD = '<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16"><path d="M1 1h4" stroke="currentColor"/></svg>'


@pytest.mark.parametrize(
    ("svg", "problem"),
    [
        (GOOD.replace("<path", "<!-- c --><path"), "XML comment"),
        (GOOD.replace("</svg>", ""), "not well-formed"),
        ('<html xmlns="http://www.w3.org/1999/xhtml"/>', "root element"),
        (GOOD.replace(' width="16" height="16"', ""), "no width/height"),
        (GOOD.replace('width="16"', 'width="24"'), "not square"),
        (GOOD.replace('width="16" height="16"', 'viewBox="0 0 32 32"'), "not 16x16"),
        (GOOD.replace('stroke="currentColor"', 'stroke="currentColor" fill="#ff0000"'), "hard-coded fill"),
        (GOOD.replace('stroke="currentColor"', 'style="stroke: red"'), "hard-coded stroke"),
        (GOOD.replace("<path", "<style>path { fill: blue }</style><path"), "hard-coded fill 'blue'"),
        (GOOD.replace('stroke="currentColor"', 'stroke="none"'), "no fill or stroke uses currentColor"),
    ],
    ids=[
        "comment",
        "malformed",
        "not-svg",
        "no-size",
        "not-square",
        "not-16",
        "fill",
        "style",
        "css",
        "no-current",
    ],
)
def test_each_icon_rule_rejects_what_it_names(svg: str, problem: str) -> None:
    assert any(problem in found for found in icon_problems(svg)), icon_problems(svg)
