"""What a package index checks in an upload, for the sdist and the wheel (a `twine check` of our own).

`twine check` parses each file's core metadata and makes sure the long description will render;
PyPI also refuses metadata whose required fields are missing or malformed. Here the same, against
pyproject.toml (so a wrong field is named with what it should be), plus what pip verifies when it
installs a wheel: every file listed in RECORD with its right sha256 and size, and nothing unlisted.
"""

from __future__ import annotations

import base64
import hashlib
import re
import tarfile
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path
from typing import Any

METADATA_VERSIONS = {"2.1", "2.2", "2.3", "2.4"}


def _normalize_requirement(text: str) -> str:
    """`Name>=1; extra == "x"` compared without case, spacing or `-`/`_`/`.` differences in the name."""
    name, rest = re.match(r"\s*([A-Za-z0-9._-]+)(.*)", text).groups()  # type: ignore[union-attr]
    return re.sub(r"[-_.]+", "-", name).lower() + re.sub(r"\s+", "", rest).replace("'", '"')


def metadata_problems(text: str, project: dict[str, Any], version: str, readme: str) -> list[str]:
    """What an index would refuse, or users would see wrong, in a core-metadata file."""
    meta: Message = Parser().parsestr(text)
    problems: list[str] = []

    def expect(field: str, wanted: str | None) -> None:
        got = meta.get(field)
        if got != wanted:
            problems.append(f"{field}: {got!r}, expected {wanted!r}")

    if meta.get("Metadata-Version") not in METADATA_VERSIONS:
        problems.append(
            f"Metadata-Version {meta.get('Metadata-Version')!r} is not one of {sorted(METADATA_VERSIONS)}"
        )
    expect("Name", project["name"])
    expect("Version", version)
    expect("Summary", project["description"])
    if "\n" in (meta.get("Summary") or ""):
        problems.append("Summary spans lines (indexes show one line)")
    expect("Requires-Python", project["requires-python"])
    expect("License-Expression", project["license"])
    if "LICENSE" not in (meta.get_all("License-File") or []):
        problems.append("License-File does not name LICENSE")
    content_type = meta.get("Description-Content-Type") or ""
    if not content_type.startswith("text/markdown"):
        problems.append(f"Description-Content-Type {content_type!r}: the README is Markdown")
    body = meta.get_payload()
    if not isinstance(body, str) or body.strip() != readme.strip():
        problems.append("the long description is not the README")
    wanted = {_normalize_requirement(r) for r in project["dependencies"]}
    for extra, requirements in project.get("optional-dependencies", {}).items():
        wanted |= {_normalize_requirement(f'{r}; extra == "{extra}"') for r in requirements}
    got = {_normalize_requirement(r) for r in meta.get_all("Requires-Dist") or []}
    if got != wanted:
        problems.append(
            f"Requires-Dist differs: missing {sorted(wanted - got)}, unexpected {sorted(got - wanted)}"
        )
    extras = set(meta.get_all("Provides-Extra") or [])
    if extras != set(project.get("optional-dependencies", {})):
        problems.append(f"Provides-Extra {sorted(extras)}")
    return problems


def _record_digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def wheel_problems(wheel: Path, project: dict[str, Any], version: str, readme: str) -> list[str]:
    """The wheel's metadata, WHEEL tags, entry points and RECORD."""
    problems: list[str] = []
    dist_info = f"{project['name'].replace('-', '_')}-{version}.dist-info"
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        for required in ("METADATA", "WHEEL", "RECORD", "entry_points.txt"):
            if f"{dist_info}/{required}" not in names:
                return [f"{dist_info}/{required} is missing"]
        problems += metadata_problems(zf.read(f"{dist_info}/METADATA").decode(), project, version, readme)
        wheel_file = Parser().parsestr(zf.read(f"{dist_info}/WHEEL").decode())
        if wheel_file.get("Root-Is-Purelib") != "true" or wheel_file.get_all("Tag") != ["py3-none-any"]:
            problems.append(
                f"WHEEL: a pure-Python wheel is tagged py3-none-any, got {wheel_file.get_all('Tag')}"
            )
        scripts = zf.read(f"{dist_info}/entry_points.txt").decode()
        for name, target in project["scripts"].items():
            if not re.search(rf"^{re.escape(name)}\s*=\s*{re.escape(target)}\s*$", scripts, re.MULTILINE):
                problems.append(f"entry point {name} = {target} is missing")
        listed: set[str] = set()
        for line in zf.read(f"{dist_info}/RECORD").decode().splitlines():
            path, digest, size = line.rsplit(",", 2)
            listed.add(path)
            if path == f"{dist_info}/RECORD":
                continue
            if path not in names:
                problems.append(f"RECORD lists {path}, which is not in the wheel")
                continue
            data = zf.read(path)
            if digest != _record_digest(data) or size != str(len(data)):
                problems.append(f"RECORD's hash or size of {path} is wrong")
        unlisted = sorted(n for n in names - listed if not n.endswith("/"))
        if unlisted:
            problems.append(f"files missing from RECORD: {unlisted[:5]}")
    return problems


def sdist_problems(sdist: Path, project: dict[str, Any], version: str, readme: str) -> list[str]:
    """The sdist's PKG-INFO and the files a build from it needs."""
    top = f"{project['name'].replace('-', '_')}-{version}"
    if sdist.name != f"{top}.tar.gz":
        return [f"the sdist is named {sdist.name}, not {top}.tar.gz"]
    with tarfile.open(sdist) as tar:
        names = set(tar.getnames())
        missing = [
            f for f in ("PKG-INFO", "pyproject.toml", "README.md", "LICENSE") if f"{top}/{f}" not in names
        ]
        if missing:
            return [f"the sdist lacks {missing}"]
        member = tar.extractfile(f"{top}/PKG-INFO")
        assert member is not None
        return metadata_problems(member.read().decode(), project, version, readme)
