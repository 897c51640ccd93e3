"""deliverables' own flags of `deskbench run`, `score` and `compare` (contract/options.py): the CLI
builds them from these models, and `prepare` / the scorer get a validated instance."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from deskbench.contract.flags import Flag
from deskbench.contract.options import ExternalAgentOptions, TrackOptions


class DeliverablesRunOptions(ExternalAgentOptions):
    """`deskbench run` on deliverables packages."""

    max_rounds: Annotated[int, Field(
        description="analytics and deliverables: execute_code calls per episode.")] = 20
    unsafe_local: Annotated[bool, Field(
        description="analytics and rlm: run model code without bubblewrap (unsafe; debugging only).")] = False
    only_task: Annotated[tuple[str, ...], Flag(name="--task"), Field(
        description="deliverables: run only these package ids (repeat).")] = ()
    only_system: Annotated[tuple[str, ...], Flag(name="--system"), Field(
        description="deliverables: run only these systems (agent:model as stored; repeat).")] = ()
    rerun: Annotated[bool, Field(description=(
        "deliverables: run the selected episodes again, replacing the stored ones (others are kept)."))] = False
    inline_chars: Annotated[int, Field(
        description="deliverables: characters of normalised input text put in the prompt.")] = 24_000
    trap_hints: Annotated[bool, Field(description=(
        "deliverables: the prompt names the trap kinds (footnotes, units, weighting...): not the paper's prompt; "
        "the system becomes deliverable-agent[trap-hints]."))] = False
    web: Annotated[str | None, Field(description=(
        "deliverables: web tools: recorded:DIR (offline) or brave (key in $BRAVE_SEARCH_API_KEY)."))] = None
    web_record: Annotated[Path | None, Field(description=(
        "deliverables: save a live --web's pages to DIR."))] = None
    deny_url: Annotated[tuple[str, ...], Field(description=(
        "deliverables: also deny URL PATTERN/@FILE."))] = ()
    allow_peeking: Annotated[bool, Field(description=(
        "deliverables: let web agents see the benchmark."))] = False


class DeliverablesScoreOptions(TrackOptions):
    """`deskbench score` of a deliverables run."""

    reviewed_only: Annotated[bool, Field(description=(
        "deliverables runs: count only rubric grades a QC reviewer has reviewed (the paper's protocol, Appendix "
        "C); by default every usable grade counts and the share reviewed is shown."))] = False


class DeliverablesCompareOptions(TrackOptions):
    """`deskbench compare` of deliverables runs."""

    reviewed_only: Annotated[bool, Field(
        description="deliverables: only QC-reviewed rubric grades count (others unscored).")] = False
