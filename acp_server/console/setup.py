"""`continual-acp setup`: the first-run questions, in a terminal: endpoint, key, model.

It is the agent's `terminal` auth method (an editor runs it in its terminal; anyone can run it by
hand). The answers are checked the way `doctor` checks them (`doctor.check_model`: one real, tiny
completion through the agent's own client), and only then written to the config file, 0600, with the
file's other settings kept. Nothing is written when the check fails and the user does not insist, on
end of input or on Ctrl-C. Exit status: 0 written, 1 not written, 2 not run in a terminal.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import re
import sys
import time
import tomllib
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from agent_core import AgentConfig, load_config
from agent_core.config.loader import config_path, default_home


@dataclass(frozen=True)
class Provider:
    label: str
    base_url: str | None  # None: asked
    needs_key: bool
    model_hint: str  # an example model id, shown as the default
    key_hint: str = ""  # where the key comes from


PROVIDERS: tuple[Provider, ...] = (
    Provider("OpenAI", "https://api.openai.com/v1", True, "gpt-4.1", "https://platform.openai.com/api-keys"),
    Provider(
        "OpenRouter", "https://openrouter.ai/api/v1", True, "openai/gpt-4.1", "https://openrouter.ai/keys"
    ),
    Provider(
        "Groq", "https://api.groq.com/openai/v1", True, "openai/gpt-oss-120b", "https://console.groq.com/keys"
    ),
    Provider(
        "DeepSeek", "https://api.deepseek.com/v1", True, "deepseek-chat", "https://platform.deepseek.com"
    ),
    Provider("Ollama on this machine", "http://localhost:11434/v1", False, "qwen2.5-coder"),
    Provider("llama.cpp server on this machine", "http://localhost:8080/v1", False, "local"),
    Provider("LM Studio on this machine", "http://localhost:1234/v1", False, "local"),
    Provider("another OpenAI-compatible endpoint", None, False, ""),
)

# The keys this command owns in config.toml; every other line of the file is kept as it was.
OWNED_KEYS = ("model", "base_url", "api_key")
MODELS_TIMEOUT_S = 3.0


class SetupCancelled(Exception):
    """End of input or Ctrl-C: nothing is written."""


class Terminal:
    """Questions and answers over the process's terminal (prompts and messages on stdout)."""

    def __init__(
        self, out: TextIO, read_line: Callable[[str], str], read_secret: Callable[[str], str]
    ) -> None:
        self.out = out
        self._read_line = read_line
        self._read_secret = read_secret

    def say(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def ask(self, prompt: str, default: str = "", *, secret: bool = False) -> str:
        shown = f"{prompt} [{default}]: " if default else f"{prompt}: "
        try:
            answer = (self._read_secret if secret else self._read_line)(shown)
        except (EOFError, KeyboardInterrupt):
            raise SetupCancelled from None
        answer = answer.strip()
        return answer or default

    def confirm(self, prompt: str, default: bool) -> bool:
        while True:
            answer = self.ask(f"{prompt} ({'Y/n' if default else 'y/N'})").lower()
            if not answer:
                return default
            if answer in ("y", "yes", "n", "no"):
                return answer.startswith("y")
            self.say("  please answer y or n")


def _printable(text: str) -> str | None:
    """Why `text` cannot go into the config file (None when it can)."""
    if any(ord(c) < 32 or ord(c) == 127 or 0xD800 <= ord(c) <= 0xDFFF for c in text):
        return "it contains control characters or undecodable bytes"
    return None


def _choose_provider(term: Terminal) -> Provider:
    term.say("Which model server?")
    for number, provider in enumerate(PROVIDERS, 1):
        where = f"  ({provider.base_url})" if provider.base_url else ""
        term.say(f"  {number}. {provider.label}{where}")
    while True:
        answer = term.ask("Number", "1")
        if answer.isdigit() and 1 <= int(answer) <= len(PROVIDERS):
            return PROVIDERS[int(answer) - 1]
        term.say(f"  please enter a number from 1 to {len(PROVIDERS)}")


def _ask_url(term: Terminal, default: str | None) -> str:
    while True:
        url = term.ask("Endpoint URL (OpenAI-compatible, usually ending in /v1)", default or "")
        problem = _printable(url)
        if problem is None and re.match(r"^https?://[^\s/]+", url):
            return url.rstrip("/")
        term.say(f"  not a URL: {problem or 'it must start with http:// or https://'}")


def _ask_key(term: Terminal, provider: Provider) -> str | None:
    while True:
        if provider.needs_key:
            where = f" (from {provider.key_hint})" if provider.key_hint else ""
            key = term.ask(f"API key{where}", secret=True)
        else:
            key = term.ask("API key (Enter for none)", secret=True)
        if not key:
            if provider.needs_key:
                term.say("  this endpoint needs a key")
                continue
            return None
        problem = _printable(key)
        if problem is None:
            return key
        term.say(f"  not a key: {problem}")


def list_models(base_url: str, api_key: str | None) -> list[str]:
    """The model ids `GET {base_url}/models` lists (an empty list when it cannot be asked): a local
    server's only model is the right default, and a typo'd id shows next to the real ones."""
    request = urllib.request.Request(f"{base_url}/models")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=MODELS_TIMEOUT_S) as response:
            body = json.loads(response.read(1 << 20))
    except (OSError, ValueError):
        return []
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return []
    return [str(item["id"]) for item in data if isinstance(item, dict) and isinstance(item.get("id"), str)]


def _ask_model(term: Terminal, provider: Provider, listed: list[str]) -> str:
    if listed:
        shown = ", ".join(listed[:12]) + (f" (and {len(listed) - 12} more)" if len(listed) > 12 else "")
        term.say(f"The endpoint lists: {shown}")
    default = listed[0] if listed and not provider.needs_key else provider.model_hint
    while True:
        model = term.ask("Model id", default)
        problem = _printable(model) if model else "it is empty"
        if problem is None:
            return model
        term.say(f"  not a model id: {problem}")


def _toml_string(value: str) -> str:
    # JSON's escapes are TOML basic-string escapes; non-ASCII stays as UTF-8 (TOML has no \ud8xx).
    return json.dumps(value, ensure_ascii=False)


def merged_config_text(existing: str, values: dict[str, str | None]) -> str:
    """`existing` with this command's keys replaced by `values` (a None value removes its key):
    they go first (top-level keys must precede every table), every other line stays as it was."""
    lines = existing.splitlines()
    first_table = next((i for i, line in enumerate(lines) if line.lstrip().startswith("[")), len(lines))
    owned = re.compile(r"^\s*(" + "|".join(OWNED_KEYS) + r")\s*=")
    kept = [line for i, line in enumerate(lines) if i >= first_table or not owned.match(line)]
    ours = [f"{key} = {_toml_string(value)}" for key, value in values.items() if value is not None]
    body = "\n".join(["# model settings written by `continual-acp setup`", *ours, *kept]).rstrip("\n")
    return body + "\n"


def write_config(path: Path, values: dict[str, str | None]) -> None:
    """Write the merged file atomically (0600, its directory 0700); raises ValueError when the result
    would not read back as these values (the old file is left untouched then). A file that is not
    valid TOML is kept beside it as `config.toml.invalid-<time>`."""
    try:
        existing = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        existing = ""
    if existing.startswith("# model settings written by `continual-acp setup`\n"):
        existing = existing.split("\n", 1)[1]
    try:
        tomllib.loads(existing)
    except tomllib.TOMLDecodeError:
        # The server ignores a file it cannot parse; keep it for the user and start a fresh one.
        aside = path.with_name(f"{path.name}.invalid-{time.strftime('%Y%m%d-%H%M%S')}")
        os.replace(path, aside)
        aside.chmod(0o600)  # it may hold a key
        existing = ""
    text = merged_config_text(existing, values)
    parsed = tomllib.loads(text)  # raises tomllib.TOMLDecodeError (a ValueError)
    for key, value in values.items():
        if parsed.get(key) != value:
            raise ValueError(f"{key} would not read back from {path} as written")
    from host_base.private_files import private_dir, write_atomic

    private_dir(path.parent, exact=False)
    write_atomic(path, text, mode=0o600)  # 0600 even over an older, wider file: it may hold a key


def _overriding_environment() -> list[str]:
    names = ("CONTINUAL_ACP_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "CONTINUAL_ACP_CONFIG")
    return [name for name in names if os.environ.get(name)]


def setup(term: Terminal) -> int:
    """The questions, the check, the write (see the module docstring for the exit status)."""
    from acp_server.console.doctor import check_model

    path = config_path(os.environ)
    term.say("continual-acp setup: which model the agent talks to")
    term.say(f"(written to {path}; run this again to change it)")
    term.say()
    try:
        base = load_config()
    except ValueError as exc:
        term.say(f"Your current settings have an error, which the answers below will replace: {exc}")
        base = AgentConfig(home=default_home(os.environ))
    while True:
        provider = _choose_provider(term)
        base_url = _ask_url(term, provider.base_url)
        api_key = _ask_key(term, provider)
        model = _ask_model(term, provider, list_models(base_url, api_key))
        term.say(f"Checking {model!r} at {base_url} ...")
        candidate = replace(base, model=model, base_url=base_url, api_key=api_key)
        result = asyncio.run(check_model(candidate))
        if result.ok:
            term.say(f"  OK  {result.detail}")
            break
        term.say(f"  FAIL  {result.detail}")
        if result.fix:
            term.say(f"        fix: {result.fix}")
        if term.confirm("Save these settings anyway?", False):
            break
        if not term.confirm("Try again?", True):
            term.say("Nothing was written.")
            return 1
    try:
        write_config(path, {"model": model, "base_url": base_url, "api_key": api_key})
    except (OSError, ValueError) as exc:
        term.say(f"Could not write {path}: {exc}. Nothing was written.")
        return 1
    term.say(f"Wrote {path} (mode 0600).")
    overriding = _overriding_environment()
    if overriding:
        term.say(f"Note: {', '.join(overriding)} set in this environment win over the file.")
    term.say("You can go back to your editor now (or run `continual-acp doctor` to check everything).")
    return 0


def run_setup() -> int:
    if not sys.stdin.isatty():
        sys.stderr.write(
            "continual-acp setup asks its questions in a terminal; run it in one, or write "
            f"{config_path(os.environ)} yourself (model, base_url, api_key) or set CONTINUAL_ACP_MODEL, "
            "OPENAI_BASE_URL and OPENAI_API_KEY in the environment that launches the agent.\n"
        )
        return 2
    term = Terminal(sys.stdout, input, getpass.getpass)
    try:
        return setup(term)
    except (SetupCancelled, KeyboardInterrupt):
        term.say("\nSetup cancelled; nothing was written.")
        return 1
