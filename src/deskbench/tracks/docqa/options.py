"""docqa's own flags of `deskbench run`, `score` and `compare` (contract/options.py): the CLI
builds them from these models, and `prepare` / the scorer get a validated instance."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from deskbench.contract.flags import Flag
from deskbench.contract.options import ExternalAgentOptions, TrackOptions


class DocQARunOptions(ExternalAgentOptions):
    """`deskbench run` on docqa tasks."""

    corpus: Annotated[Path | None, Flag(short="-c"), Field(
        description="Corpus directory (not needed by guess).")] = None
    limit: Annotated[int | None, Field(
        description="docqa and analytics: only the first N tasks (deliverables: --task).")] = None
    max_steps: Annotated[int | None, Field(description=(
        "Iterations per episode (T); default: bm25-agent its preset's (official 5, paper 10), rlm 30 root "
        "iterations (the official RLM's)."))] = None
    max_sub_calls: Annotated[int | None, Field(
        description="rlm: llm_query sub-calls per episode (default: no cap, as the official RLM).")] = None
    top_k: Annotated[int | None, Flag(short="-k"), Field(description=(
        "Pages per search (default: bm25-agent its preset's, official 4, paper 5; m3docrag, colbert-llm, mdocagent 1 "
        "per retrieval, MDocAgent's; the other agents 5)."))] = None
    protocol: Annotated[str | None, Field(description=(
        "bm25-agent's loop: official (the provider's official MADQA script: openai_agent.py, ...) | paper "
        "(Prompt 5, every provider) | a script's protocol by name (default: the preset's)."))] = None
    preset: Annotated[str | None, Field(description=(
        "bm25-agent's defaults: official (process_dataset.py: the official protocol, T=5, k=4; the default) | "
        "paper (Appendix G.1: Prompt 5 loop, T=10, k=5)."))] = None
    view: Annotated[str | None, Field(
        description="Pages shown as image | text (default: image; text for a model without vision).")] = None
    retriever: Annotated[str, Flag(short="-r"), Field(description=(
        "What searches run on: bm25 (MADQA's Whoosh tool) | KIND=MODEL (`deskbench list retrievers`) | A+B "
        "fused by RRF (docs/retrievers.md)."))] = "bm25"
    retriever_download: Annotated[bool, Field(description=(
        "Let --retriever fetch a model missing here from the Hugging Face hub."))] = False
    text_retriever: Annotated[str | None, Field(description=(
        "colbert-llm, mdocagent: text retrieval SPEC (default colbert=colbert-ir/colbertv2.0)."))] = None
    image_retriever: Annotated[str | None, Field(description=(
        "m3docrag, mdocagent: page-image retrieval SPEC (default colpali=vidore/colpali)."))] = None
    unsafe_local: Annotated[bool, Field(
        description="analytics and rlm: run model code without bubblewrap (unsafe; debugging only).")] = False


class DocQAScoreOptions(TrackOptions):
    """`deskbench score` of a docqa run or a predictions file."""

    tasks: Annotated[Path | None, Flag(short="-t"), Field(
        description="Tasks JSONL (MADQA dataset rows); a run knows its own.")] = None
    pool_humans: Annotated[bool, Field(description=(
        "docqa run: one 'human' row for every annotator's human:NAME episodes (earliest answer per "
        "question)."))] = False
    by: Annotated[tuple[str, ...], Field(description="Also break down by: domain, category.")] = ()
    official: Annotated[bool, Flag(negative="--no-official"), Field(description=(
        "The official MADQA evaluator's numbers (docs/fidelity.md): tasks without a prediction not counted, "
        "error rows and failed judge calls 0, Kuiper on len(search_history) else iterations (effort > 0, file "
        "order), pages as written, the official interval; adds 'official_metrics' to --json."))] = False
    kuiper_ties: Annotated[str, Field(
        description="robust (tied efforts are one block) | stable (input order)")] = "robust"
    effort: Annotated[str, Field(description="Effort for Kuiper: steps | tokens | seconds")] = "steps"
    skip_invalid: Annotated[bool, Flag(negative="--no-skip-invalid"), Field(
        description="Skip (and count) bad lines instead of stopping.")] = False
    judge_cache: Annotated[Path | None, Field(description=(
        "Judge response cache, a SQLite file (default: deskbench's shared response cache)."))] = None
    cache: Annotated[bool, Flag(negative="--no-cache"), Field(
        description="Reuse and store judge responses in the judge cache.")] = True
    q0: Annotated[float | None, Field(
        description="Judge specificity, for bias correction [default: 1.0].")] = None
    q1: Annotated[float | None, Field(
        description="Judge sensitivity, for bias correction [default: 0.98].")] = None
    m0: Annotated[int | None, Field(
        description="Calibration items judged incorrect by humans [default: 48].")] = None
    m1: Annotated[int | None, Field(
        description="Calibration items judged correct by humans [default: 152].")] = None
    judge_calibration: Annotated[Path | None, Field(
        description="q0, q1, m0, m1 from 'deskbench calibrate compute --json' output.")] = None


class DocQACompareOptions(TrackOptions):
    """`deskbench compare` of docqa runs: the judge's cache, as `score` takes it."""

    judge_cache: Annotated[Path | None, Field(description=(
        "Judge response cache, a SQLite file (default: deskbench's shared response cache)."))] = None
    cache: Annotated[bool, Flag(negative="--no-cache"), Field(
        description="Reuse and store judge responses in the judge cache.")] = True
