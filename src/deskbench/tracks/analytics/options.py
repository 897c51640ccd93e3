"""analytics' own flags of `deskbench run`, `score` and `compare` (contract/options.py): the CLI
builds them from these models, and `prepare` / the scorer get a validated instance."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from deskbench.contract.flags import Flag
from deskbench.contract.options import ExternalAgentOptions, TrackOptions

_FILE_JUDGE_ALL = ("analytics: with --file-judge, every output file goes to the File Judge, the comparator's "
                   "verdict kept beside it (the paper's protocol; the default) | only files the comparator cannot "
                   "read (cheaper; not the paper's protocol).")
_FILE_JUDGE = ("the agentic File Judge model (AIDABench Listing 5: sandboxed code, at most 20 calls per file); it "
               "decides every output file (see --file-judge-deferred); off by default: the spreadsheet comparator "
               "decides.")


class AnalyticsRunOptions(ExternalAgentOptions):
    """`deskbench run` on analytics tasks."""

    limit: Annotated[int | None, Field(
        description="docqa and analytics: only the first N tasks (deliverables: --task).")] = None
    max_rounds: Annotated[int, Field(
        description="analytics and deliverables: execute_code calls per episode.")] = 20
    no_summary: Annotated[bool, Field(
        description="analytics: leave out the auxiliary spreadsheet summary (the paper's ablation).")] = False
    last_round_note: Annotated[bool, Field(description=(
        "analytics: the last execute_code result tells the model to answer now (not the paper's protocol; the "
        "system becomes analyst-agent[last-round-note])."))] = False
    cjk_font_hint: Annotated[bool, Field(description=(
        "analytics: the tool description says CJK fonts are installed (not the paper's protocol; the system "
        "becomes analyst-agent[cjk-font-hint])."))] = False
    unsafe_local: Annotated[bool, Field(
        description="analytics and rlm: run model code without bubblewrap (unsafe; debugging only).")] = False
    chart_judge: Annotated[str | None, Flag(preflight=True), Field(
        description="analytics: vision judge for charts (default: --judge).")] = None
    file_judge: Annotated[str | None, Flag(preflight=True), Field(description="analytics: " + _FILE_JUDGE)] = None
    file_judge_all: Annotated[bool | None, Flag(negative="--file-judge-deferred"), Field(
        description=_FILE_JUDGE_ALL)] = None


class AnalyticsScoreOptions(TrackOptions):
    """`deskbench score` of an analytics run: its judges."""

    chart_judge: Annotated[str | None, Flag(preflight=True), Field(
        description="analytics runs: vision judge for charts (default: --judge).")] = None
    file_judge: Annotated[str | None, Flag(preflight=True), Field(description="analytics runs: " + _FILE_JUDGE)] = None
    file_judge_all: Annotated[bool | None, Flag(negative="--file-judge-deferred"), Field(
        description=_FILE_JUDGE_ALL)] = None


class AnalyticsCompareOptions(TrackOptions):
    """`deskbench compare` of analytics runs: their judges, as `score` takes them."""

    chart_judge: Annotated[str | None, Flag(preflight=True), Field(
        description="analytics: vision judge for charts (default: --judge).")] = None
    file_judge: Annotated[str | None, Flag(preflight=True), Field(description=(
        "analytics: the agentic File Judge model (AIDABench Listing 5); off by default: the spreadsheet "
        "comparator decides."))] = None
    file_judge_all: Annotated[bool | None, Flag(negative="--file-judge-deferred"), Field(description=(
        "analytics: with --file-judge, every output file goes to the File Judge (the paper's protocol; the "
        "default) | only files the comparator cannot read."))] = None
