"""The output limit of `--model local` (models/llama_server.py): llama-cpp-python's
`chatml-function-calling` handler generates with max_tokens=None, which runs to the end of the
context; every completion inside it is capped at the request's max_tokens or DEFAULT_CAP."""

from __future__ import annotations

from typing import Any

from conftest import require_local_model


class _Llama:
    """Records the max_tokens each completion is asked for (what the handler gets as `llama`)."""

    def __init__(self) -> None:
        self.asked: list[int | None] = []

    def create_completion(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.asked.append(kwargs.get("max_tokens"))
        return {}


def _handler(*, llama: _Llama, max_tokens: int | None = None, **kwargs: Any) -> str:
    """As llama-cpp-python's handler does in "auto" tool mode: a completion given no limit (None),
    and one with a limit of its own."""
    llama.create_completion(prompt="which tool?", max_tokens=None)
    llama.create_completion(prompt="the arguments", max_tokens=7)
    return "reply"


def test_every_completion_of_the_handler_has_an_output_limit() -> None:
    require_local_model()
    from deskbench.models.llama_server import DEFAULT_CAP, bounded

    llama = _Llama()
    assert bounded(_handler)(llama=llama, messages=[]) == "reply"
    assert bounded(_handler)(llama=llama, messages=[], max_tokens=32) == "reply"
    assert llama.asked == [DEFAULT_CAP, 7, 32, 7]
    assert DEFAULT_CAP == 512
    assert "create_completion" not in vars(llama)  # the model's own method is back after the request
