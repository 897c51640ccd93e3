"""analytics' part of `deskbench calibrate` (Track.judge_calibration): scored items of analytics
runs with the verdict of the evaluator that decided each (--judge for QA, --chart-judge,
--file-judge as `deskbench score` takes them; --category to sample one category)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from deskbench.errors import UserError, one_of

if TYPE_CHECKING:
    from deskbench.scoring.judge_calibration import CalibrationItem


def _text(params: Mapping[str, object], name: str) -> str | None:
    """A str flag's value from the command's parameters (None: not given)."""
    value = params.get(name)
    if value is not None and not isinstance(value, str):
        raise TypeError(f"the calibrate command's {name} is a {type(value).__name__}, not a str")
    return value


class AnalyticsCalibration:
    """contract/cli.py JudgeCalibration for analytics runs."""

    def sample_items(self, run_dirs: Sequence[Path],
                     params: Mapping[str, object]) -> tuple[Sequence[CalibrationItem], Mapping[str, int]]:
        """The analytics items scored by the judges `deskbench score` would build from these flags."""
        from deskbench.models.registry import preflight
        from deskbench.scoring.judges import open_judge
        from deskbench.tracks.analytics.score_command import (
            close_judges,
            file_judge_for,
            file_judge_mode,
        )
        from deskbench.tracks.analytics.scoring.analytics import AnalyticsJudges
        from deskbench.tracks.analytics.scoring.analytics_calibration import analytics_items
        from deskbench.tracks.analytics.tasks import CATEGORIES

        asked, judge, system = _text(params, "category"), _text(params, "judge"), _text(params, "system")
        chart_judge, file_judge = _text(params, "chart_judge"), _text(params, "file_judge")
        file_judge_all, unsafe_local = params.get("file_judge_all"), bool(params.get("unsafe_local"))
        concurrency = params.get("concurrency")
        assert isinstance(concurrency, int)
        assert file_judge_all is None or isinstance(file_judge_all, bool)
        category = None if asked is None else one_of(asked, CATEGORIES, "--category")
        if params.get("judge_cache") is not None or not params.get("cache", True):
            raise UserError("--judge-cache and --no-cache are for docqa runs; analytics judges always use the "
                            "response cache, as 'deskbench score' does (DESKBENCH_CACHE_DIR moves it)")
        chart_judge = chart_judge or judge
        every_file = file_judge_mode(file_judge, file_judge_all)
        for name in (judge, chart_judge, file_judge):
            if name:
                preflight(name, role="judge")
        judges = AnalyticsJudges(qa=open_judge(judge, concurrency),
                                 chart=open_judge(chart_judge, concurrency),
                                 file=file_judge_for(file_judge, concurrency, unsafe_local=unsafe_local),
                                 file_all=every_file)
        try:
            return analytics_items(run_dirs, judges, system=system, category=category,
                                   concurrency=concurrency)
        finally:
            close_judges(judges)

    def note(self, items: Sequence[CalibrationItem]) -> str | None:
        """How a chart's verdict is read, when the items hold a chart."""
        from deskbench.tracks.analytics.scoring.analytics_calibration import CHART_RULE

        return f"charts: {CHART_RULE}" if any(i.category == "visualization" for i in items) else None


CALIBRATION = AnalyticsCalibration()
