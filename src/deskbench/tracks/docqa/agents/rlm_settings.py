"""The RLM agent's settings, apart so that the agent and the REPL host both read them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RlmSettings:
    output_chars: int = 4000  # REPL output shown to the root model per code block
    sub_concurrency: int = 4  # llm_query_batched prompts in flight at once
    max_iterations: int = 30  # root iterations when the run sets no --max-steps (the RLM library's default)
    max_sub_calls: int | None = None  # per episode; None: no cap, as the official RLM (--max-sub-calls sets one)
    start_seconds: float = 120.0  # REPL start-up, which reads the whole context
    final_chars: int = 20_000  # most of a FINAL_VAR value passed to the extraction step
