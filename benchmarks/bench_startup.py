"""Start-up as a user gets it: spawn -> `session/new` from the installed wheel, beside the SDK echo agent.

    .venv/bin/python benchmarks/bench_startup.py [--runs N]

The wheel is built from this checkout and installed into fresh virtualenvs in a temp dir (the
dependencies from the wheelhouse the packaging test keeps, else the package index), and the
`continual-acp` console script is launched the way an editor launches it: no arguments, the product
defaults, a model configured in `config.toml` (not in the environment), cwd outside the repository.
Two installs, because an install's bytecode decides most of the figure:

* `bytecode`: as `pip install` leaves it (every module compiled at install);
* `no bytecode`: installed without compiling (as `uv`/`uvx` installs by default) and launched with
  PYTHONDONTWRITEBYTECODE=1 (or a read-only install): Python may not write bytecode beside the
  sources, so the product keeps it in its data home (acp_server/process/bytecode_cache.py); the first launch
  in a home compiles (reported apart), later ones read it.

Each arm keeps one home across its runs, as a user's launches do; each run opens a fresh project.

The baseline is the official ACP TypeScript SDK's smallest agent (`echo_agent.mjs`, on Node, the SDK
from tests/conformance/node_modules). Runs are interleaved so machine load hits every arm alike; the
time is from spawn to the `session/new` response (`initialize` sent at once, as editors do).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from figures import emit, single, summary

ROOT = Path(__file__).resolve().parents[1]
ECHO = (shutil.which("node") or "node", str(ROOT / "benchmarks" / "echo_agent.mjs"))
IGNORED = (".git", ".venv", "node_modules", "__pycache__", "*.egg-info", "build", "dist", "*.pyc")
IGNORED += (".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis", "benchmarks", "tests", "docs")
CONFIG = 'model = "bench-model"\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "bench-key"\n'
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}


def wheelhouse() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(
        os.environ.get("CONTINUAL_ACP_TEST_WHEELHOUSE")
        or cache / "continual-acp-tests" / f"wheelhouse-py{sys.version_info.major}{sys.version_info.minor}"
    )


def build_wheel(tmp: Path) -> Path:
    """The wheel of this checkout (working tree, uncommitted changes included), built in isolation."""
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(*IGNORED))
    out = tmp / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(src)],
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("continual_acp-*.whl")
    return wheel


def install(wheel: Path, venv: Path, *, compile_bytecode: bool) -> None:
    """A fresh venv with the wheel and its dependencies (offline from the wheelhouse when it has them)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    house = wheelhouse()
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet"]
    if not compile_bytecode:
        pip.append("--no-compile")
    offline = [*pip, "--no-index", "--find-links", str(house), str(wheel)]
    if not house.is_dir() or subprocess.run(offline, capture_output=True).returncode != 0:
        subprocess.run([*pip, str(wheel)], check=True, capture_output=True)


def user_home(base: Path) -> Path:
    """A user's home with a model configured in config.toml; one per arm, kept across its runs (a
    user's launches share one home, so whatever the product keeps there between launches counts)."""
    (base / ".config" / "continual-acp").mkdir(parents=True)
    (base / ".config" / "continual-acp" / "config.toml").write_text(CONFIG)
    return base


def spawn_to_session_new(argv: list[str], env: dict[str, str], home: Path) -> float:
    """Seconds from spawn to the `session/new` answer, in `home` and a fresh project directory."""
    with tempfile.TemporaryDirectory(prefix="bench-startup-project-") as project:
        run_env = {**env, "HOME": str(home)}
        new = {"cwd": project, "mcpServers": []}
        started = time.perf_counter()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=run_env,
            cwd=project,
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
            proc.stdin.flush()
            _answer(proc.stdout, 1)
            request = {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": new}
            proc.stdin.write((json.dumps(request) + "\n").encode())
            proc.stdin.flush()
            answer = _answer(proc.stdout, 2)
            elapsed = time.perf_counter() - started
            if "result" not in answer:
                raise RuntimeError(f"session/new failed: {answer}")
            return elapsed
        finally:
            proc.stdin.close()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _answer(stdout: object, ident: int) -> dict[str, object]:
    while True:
        line = stdout.readline()  # type: ignore[attr-defined]
        if not line:
            raise RuntimeError(f"the agent closed stdout before answering request {ident}")
        message: dict[str, object] = json.loads(line)
        if message.get("id") == ident and "method" not in message:
            return message


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    base_env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    with tempfile.TemporaryDirectory(prefix="bench-startup-install-") as tmp:
        wheel = build_wheel(Path(tmp))
        compiled, plain = Path(tmp) / "venv-bytecode", Path(tmp) / "venv-plain"
        install(wheel, compiled, compile_bytecode=True)
        install(wheel, plain, compile_bytecode=False)
        arms = {
            "ours, bytecode": [str(compiled / "bin" / "continual-acp")],
            "ours, no bytecode": [str(plain / "bin" / "continual-acp")],
            "SDK echo agent (Node)": list(ECHO),
        }
        homes = {name: user_home(Path(tmp) / f"home-{i}") for i, name in enumerate(arms)}
        first = {}
        for name, argv in arms.items():  # a first launch each: the page cache warm for every arm alike
            first[name] = spawn_to_session_new(argv, base_env, homes[name]) * 1000
        samples: dict[str, list[float]] = {name: [] for name in arms}
        for run in range(args.runs):
            for name, argv in arms.items():
                samples[name].append(spawn_to_session_new(argv, base_env, homes[name]) * 1000)
            print(f"run {run + 1}/{args.runs}", file=sys.stderr)
    figures = {f"spawn -> session/new: {name}": summary(v, "ms") for name, v in samples.items()}
    figures["first launch in a new home: ours, no bytecode"] = single(first["ours, no bytecode"], "ms")
    echo = figures["spawn -> session/new: SDK echo agent (Node)"]["median"]
    print(f"| spawn -> session/new ({args.runs} runs) | median ms | p10-p90 | ours / echo |")
    print("| --- | --- | --- | --- |")
    for name, figure in figures.items():
        ratio = figure["median"] / echo
        print(f"| {name} | {figure['median']:.0f} | {figure['p10']:.0f}-{figure['p90']:.0f} | {ratio:.2f}x |")
    ratios = {
        name.split(": ", 1)[1]: round(figure["median"] / echo, 2)
        for name, figure in figures.items()
        if name.startswith("spawn -> ") and "echo" not in name
    }
    emit(figures, ratios_to_echo=ratios)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
