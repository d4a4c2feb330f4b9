"""Generate src/api.py from api.toml."""

import tomllib
from pathlib import Path

spec = tomllib.loads(Path("api.toml").read_text())
lines = ["# DO NOT EDIT: generated from api.toml by tools/gen.py", "ROUTES = {"]
lines += [f"    {name!r}: {entry['path']!r}," for name, entry in sorted(spec["endpoints"].items())]
lines += ["}", ""]
Path("src/api.py").write_text("\n".join(lines))
print("generated src/api.py")
