"""Run llama-cpp-python's OpenAI-compatible server with the CPU's extra weight buffers turned off.

`python benchmarks/llama_server.py --model M.gguf --chat_format chatml-function-calling --port P`
takes the same arguments as `python -m llama_cpp.server`. On CPUs with AMX (Sapphire Rapids and
later, this machine included) llama.cpp 0.3.36 repacks quantized weights for its AMX matmul, and that
kernel segfaults on the first batch of more than one token (every real prompt): the whole server
dies with an empty reply. llama.cpp's own server turns the repacking off with `--no-repack`;
llama-cpp-python has no such flag, so the default model parameters are changed here before the
server loads the model. Generation is otherwise unchanged (the plain CPU kernels are used).
"""

from __future__ import annotations

import runpy
from typing import Any


def _without_extra_buffers() -> None:
    import llama_cpp.llama_cpp as native

    defaults = native.llama_model_default_params

    def params() -> Any:
        chosen = defaults()
        chosen.use_extra_bufts = False
        return chosen

    native.llama_model_default_params = params


def _register_gemma_with_system() -> None:
    """`--chat_format gemma-system`: Gemma's own turn format with the system message folded into the
    first user turn, as Gemma's published chat template does. llama-cpp-python's `gemma` format drops
    system messages (the agent's instructions and the harness's lessons would never reach the model),
    the packaged GGUF carries no template, and the llama-2 fallback makes the model echo its prompt."""
    from llama_cpp import llama_chat_format as chat

    def text_of(content: Any) -> str:
        if isinstance(content, list):
            return "".join(part.get("text", "") for part in content if isinstance(part, dict))
        return str(content or "")

    @chat.register_chat_format("gemma-system")  # type: ignore[misc]
    def format_gemma_system(messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        system = "\n\n".join(text_of(m.get("content")) for m in messages if m["role"] == "system")
        prompt, pending_system = "", system
        for message in messages:
            role, content = message["role"], text_of(message.get("content"))
            if role == "system":
                continue
            if role == "tool":  # Gemma's template knows two roles: a result is the user's turn
                role, content = "user", f"Output of the cell:\n{content}"
            if role == "user" and pending_system:
                content, pending_system = f"{pending_system}\n\n{content}", ""
            turn = "model" if role == "assistant" else "user"
            prompt += f"<start_of_turn>{turn}\n{content}<end_of_turn>\n"
        prompt += "<start_of_turn>model\n"
        return chat.ChatFormatterResponse(prompt=prompt, stop="<end_of_turn>")


if __name__ == "__main__":
    _without_extra_buffers()
    _register_gemma_with_system()
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
