"""The project's style check: every function in src/ has a docstring and full type hints."""

import ast
import sys
from pathlib import Path

problems = []
for path in sorted(Path("src").rglob("*.py")):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef):
            typed = node.returns is not None and all(a.annotation is not None for a in node.args.args)
            if ast.get_docstring(node) is None or not typed:
                problems.append(f"{path}:{node.lineno}: {node.name} needs a docstring and type hints")
print("\n".join(problems) or "lint: ok")
sys.exit(1 if problems else 0)
