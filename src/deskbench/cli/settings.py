"""The model-settings flags every command that calls a model shares, in one place.

Defaults are "not sent": the provider's own (as the official MADQA agents do), except what a
provider requires (Anthropic's max_tokens: 4096) and a judge's temperature 0 where the model
takes one (the official MADQA judge). Values are checked against the capability table before
anything runs (models/settings.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:  # models/settings.py (pydantic) is imported when a command runs, not at start-up
    from deskbench.models.settings import Sampling

PANEL = "Model settings"

TemperatureOpt = Annotated[float | None, typer.Option(
    "--temperature", rich_help_panel=PANEL,
    help="Agent sampling temperature (default: not sent, the provider's default; reasoning models take none).")]
TopPOpt = Annotated[float | None, typer.Option(
    "--top-p", rich_help_panel=PANEL, help="Agent nucleus sampling (default: not sent).")]
# one help line each (`run --help` stays under 220 lines at 80 columns); docs/models.md says more
TopKOpt = Annotated[int | None, typer.Option(
    "--sampling-top-k", rich_help_panel=PANEL, help="Agent top-k (default: not sent).")]
DecodingOpt = Annotated[str | None, typer.Option(
    "--decoding", rich_help_panel=PANEL, help="Per-model preset: aida (Table 3).")]
ReasoningEffortOpt = Annotated[str | None, typer.Option(
    "--reasoning-effort", rich_help_panel=PANEL,
    help="Agent reasoning effort for reasoning models (e.g. minimal | low | medium | high) (default: not sent).")]
MaxTokensOpt = Annotated[int | None, typer.Option(
    "--max-tokens", rich_help_panel=PANEL,
    help="Agent output limit per call, sent as the model's own field (max_completion_tokens on OpenAI) "
         "[default: not sent; Anthropic: 4096, which its API requires].")]
JudgeTemperatureOpt = Annotated[float | None, typer.Option(
    "--judge-temperature", rich_help_panel=PANEL,
    help="Judge temperature (default: 0 where the judge model takes one, as the official MADQA judge; else not sent).")]
JudgeTopPOpt = Annotated[float | None, typer.Option(
    "--judge-top-p", rich_help_panel=PANEL, help="Judge nucleus sampling (default: not sent).")]
JudgeReasoningEffortOpt = Annotated[str | None, typer.Option(
    "--judge-reasoning-effort", rich_help_panel=PANEL, help="Judge reasoning effort (default: not sent).")]
JudgeMaxTokensOpt = Annotated[int | None, typer.Option(
    "--judge-max-tokens", rich_help_panel=PANEL,
    help="Judge output limit per call (default: not sent; Anthropic: 4096).")]
CapabilitiesOpt = Annotated[Path | None, typer.Option(
    "--capabilities", rich_help_panel=PANEL,
    help="Capability rules (TOML or JSON) applied after deskbench's table, e.g. for a model it does not know "
         "[env: DESKBENCH_CAPABILITIES].")]


def agent_sampling(temperature: float | None, top_p: float | None, reasoning_effort: str | None,
                   max_tokens: int | None, *, top_k: int | None = None, decoding: str | None = None) -> Sampling:
    """The settings the flags ask for; a --decoding naming no preset (or no row of it) is refused here,
    before anything runs."""
    from deskbench.models.settings import Sampling

    if decoding is not None:
        from deskbench.models.decoding import check_spec

        check_spec(decoding)
    return Sampling(temperature=temperature, top_p=top_p, reasoning_effort=reasoning_effort, max_tokens=max_tokens,
                    top_k=top_k, decoding=decoding)


def use_model_flags(capabilities: Path | None, *, judge_temperature: float | None = None,
                    judge_top_p: float | None = None, judge_reasoning_effort: str | None = None,
                    judge_max_tokens: int | None = None) -> Sampling:
    """Load the capability file (if any) and set the judge flags for this process; returns the
    judge's asked settings."""
    from deskbench.models.capabilities import use_capabilities
    from deskbench.models.settings import use_sampling

    if capabilities is not None:
        use_capabilities(capabilities)
    judge = agent_sampling(judge_temperature, judge_top_p, judge_reasoning_effort, judge_max_tokens)
    use_sampling("judge", judge)
    return judge

JudgeCacheOpt = Annotated[Path | None, typer.Option(
    "--judge-cache", help="Judge response cache, a SQLite file (default: deskbench's shared response cache).")]
CacheOpt = Annotated[bool, typer.Option(
    "--cache/--no-cache", help="Reuse and store judge responses in the judge cache.")]
JudgeConcurrencyOpt = Annotated[int, typer.Option("--judge-concurrency", help="Judge calls in flight at once.")]

