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


if __name__ == "__main__":
    _without_extra_buffers()
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
