"""`deskbench report`: one self-contained HTML report over runs of every track."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deskbench.cli.settings import (
    CacheOpt,
    CapabilitiesOpt,
    JudgeCacheOpt,
    JudgeConcurrencyOpt,
    JudgeMaxTokensOpt,
    JudgeReasoningEffortOpt,
    JudgeTemperatureOpt,
    JudgeTopPOpt,
    use_model_flags,
)
from deskbench.console import out
from deskbench.errors import UserError


def register(app: typer.Typer) -> None:
    """Add `report`."""
    for command in (report,):
        app.command()(command)


def report(
    ctx: typer.Context,
    run_dirs: Annotated[list[Path], typer.Argument(help="Run directories (the --out of 'deskbench run').")],
    output: Annotated[Path, typer.Option("--output", help="HTML file to write.")] = Path("report.html"),
    judge: Annotated[str | None, typer.Option(help="LLM judge model for judged and bias-corrected accuracy (else ANLS* >= 0.5).")] = None,
    judge_cache: JudgeCacheOpt = None,
    cache: CacheOpt = True,
    concurrency: JudgeConcurrencyOpt = 16,
    chart_judge: Annotated[str | None, typer.Option(help="analytics runs: vision judge for charts (default: --judge).")] = None,
    file_judge: Annotated[str | None, typer.Option("--file-judge", help="analytics runs: the agentic File Judge model (AIDABench Listing 5: sandboxed code, at most 20 calls per file); it decides every output file (see --file-judge-deferred); off by default: the spreadsheet comparator decides.")] = None,
    file_judge_all: Annotated[bool | None, typer.Option("--file-judge-all/--file-judge-deferred", help="analytics: with --file-judge, every output file goes to the File Judge, the comparator's verdict kept beside it (the paper's protocol; the default) | only files the comparator cannot read (cheaper; not the paper's protocol).")] = None,
    pool_humans: Annotated[bool, typer.Option("--pool-humans", help="docqa runs: one 'human' row for every annotator's human:NAME episodes (earliest answer per question).")] = False,
    corpus: Annotated[Path | None, typer.Option("--corpus", "-c", help="docqa runs: the corpus they searched; adds its statistics by domain and category (MADQA Tables 2 and 6).")] = None,
    viewer_url: Annotated[str | None, typer.Option("--viewer-url", help="Link each leaderboard row and bad case to its episodes in a running 'deskbench view' at this address (e.g. http://127.0.0.1:8770); without it the report links nowhere (a standalone file).")] = None,
    reviewed_only: Annotated[bool, typer.Option("--reviewed-only", help="deliverables runs: count only rubric grades a QC reviewer has reviewed (the paper's protocol, Appendix C); by default every usable grade counts and the share reviewed is shown.")] = False,
    judge_temperature: JudgeTemperatureOpt = None,
    judge_top_p: JudgeTopPOpt = None,
    judge_reasoning_effort: JudgeReasoningEffortOpt = None,
    judge_max_tokens: JudgeMaxTokensOpt = None,
    capabilities: CapabilitiesOpt = None,
) -> None:
    """Write a self-contained HTML report: docqa leaderboard, calibration and budget curves, error
    classes, the MADQA appendix analyses (effort measures, failure profiles, search trajectories,
    cost, human response time; corpus statistics with --corpus); analytics pass@1 / pass@k /
    avg@k by category and difficulty, and bad cases; deliverables VRS and ACCEPT; any other
    track's leaderboard and pairwise tests. Each track's section is scored with the judges these
    flags set up; a flag for a track without runs here is unused."""
    from deskbench.report.data import build_report
    from deskbench.report.render import write_report

    use_model_flags(capabilities, judge_temperature=judge_temperature, judge_top_p=judge_top_p,
                    judge_reasoning_effort=judge_reasoning_effort, judge_max_tokens=judge_max_tokens)
    if concurrency < 1:
        raise UserError(f"--judge-concurrency {concurrency} is not valid; use 1 or more")
    if viewer_url is not None and not viewer_url.startswith(("http://", "https://")):
        raise UserError(f"--viewer-url {viewer_url!r} is not an http(s) address; give the one 'deskbench view' prints, "
                        "e.g. http://127.0.0.1:8770")
    params = {name: value for name, value in ctx.params.items()
              if name not in ("run_dirs", "viewer_url", "judge", "concurrency")}
    if corpus is not None:  # a typo is named, with the corpora nearby, whatever the runs hold
        from deskbench.paths import require_corpus

        require_corpus(corpus, "--corpus")
    data = build_report(run_dirs, None, judge=judge, concurrency=concurrency, **params)  # each track's scorer: from the flags
    write_report(data, output, viewer_url)
    out.print(f"wrote {output} ({', '.join(f'{s.n_systems} {s.track}' for s in data.sections)} system(s))")
