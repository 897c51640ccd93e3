"""docqa's part of `deskbench calibrate` (Track.judge_calibration): (question, gold variants,
prediction) items of docqa runs; with --judge, the scorer's verdict stored in each item (and the
sample stratified by it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from deskbench.errors import UserError

if TYPE_CHECKING:
    from deskbench.scoring.judge_calibration import CalibrationItem



class DocqaCalibration:
    """contract/cli.py JudgeCalibration for docqa runs."""

    def sample_items(self, run_dirs: Sequence[Path],
                     params: Mapping[str, object]) -> tuple[Sequence[CalibrationItem], Mapping[str, int]]:
        from deskbench.tracks.docqa.scoring.docqa_calibration import collect_items, judge_items

        for flag, given in (("--category", params.get("category")), ("--chart-judge", params.get("chart_judge")),
                            ("--file-judge", params.get("file_judge")),
                            ("--file-judge-all/--file-judge-deferred", params.get("file_judge_all") is not None),
                            ("--unsafe-local", params.get("unsafe_local"))):
            if given:  # a flag of analytics' calibration
                raise UserError(f"{flag} is for analytics runs; {run_dirs[0]} is a docqa run: drop {flag}")
        system, judge, judge_cache = params.get("system"), params.get("judge"), params.get("judge_cache")
        concurrency = params.get("concurrency")
        assert system is None or isinstance(system, str)
        assert judge is None or isinstance(judge, str)
        assert judge_cache is None or isinstance(judge_cache, Path)
        assert isinstance(concurrency, int)
        items = collect_items(run_dirs, system)
        if judge:
            from deskbench.tracks.docqa.scoring.llm_judge import make_judge

            items = judge_items(items, make_judge(judge, judge_cache, not params.get("cache", True), concurrency))
        return items, {}

    def note(self, items: Sequence[CalibrationItem]) -> str | None:
        return None


CALIBRATION = DocqaCalibration()
