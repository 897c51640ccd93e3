"""llama-cpp-python's OpenAI-compatible server, as deskbench runs it, with one fix.

In the `chatml-function-calling` handler's "auto" tool mode, llama-cpp-python (0.3.x) generates
every part of the reply with max_tokens=None, so a small model can write until its context is
full: minutes per call on a CPU, and the server goes on generating after the client gave up.
Here every completion inside that handler is capped at the request's max_tokens (or
DEFAULT_CAP). Run as `python -m deskbench.models.llama_server` with llama_cpp.server's flags.
"""

from __future__ import annotations

from typing import Any

from llama_cpp import llama_chat_format

HANDLER = "chatml-function-calling"
DEFAULT_CAP = 512


def bounded(handler: Any) -> Any:
    """The handler, with max_tokens applied to each of its completions."""

    def run(*, llama: Any, max_tokens: int | None = None, **kwargs: Any) -> Any:
        cap = max_tokens or DEFAULT_CAP
        create = llama.create_completion

        def capped(*args: Any, **kw: Any) -> Any:
            if kw.get("max_tokens") is None:
                kw["max_tokens"] = cap
            return create(*args, **kw)

        llama.create_completion = capped  # the server serves one request at a time per model
        try:
            return handler(llama=llama, max_tokens=max_tokens, **kwargs)
        finally:
            del llama.create_completion

    return run


def main() -> None:
    original = llama_chat_format.get_chat_completion_handler(HANDLER)
    llama_chat_format.LlamaChatCompletionHandlerRegistry().register_chat_completion_handler(  # type: ignore[no-untyped-call]  # llama_cpp leaves it unannotated
        HANDLER, bounded(original), overwrite=True)
    from llama_cpp.server.__main__ import main as serve

    serve()  # type: ignore[no-untyped-call]  # llama_cpp's server main is unannotated


if __name__ == "__main__":
    main()
