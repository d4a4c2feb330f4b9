"""The project's release steps in order: VERSION, the CHANGELOG.md heading, the RELEASES line."""

from pathlib import Path


def release(version: str) -> str:
    Path("VERSION").write_text(version + "\n")
    log = Path("CHANGELOG.md").read_text()
    Path("CHANGELOG.md").write_text(
        log.replace("# Changelog\n", f"# Changelog\n\n## {version}\n\n- Release {version}.\n", 1)
    )
    with open("RELEASES", "a") as fh:
        fh.write(version + "\n")
    return f"released {version}; now run python3 tools/check-release.py {version}"
