"""analytics' web screens for people (Track.web_screens): how a judge calibration item of its
runs is shown to a labeller (`deskbench serve --calibration`, web/calibration.py serves the rest):
the instruction and its category, what decides correct for that category, the reference answer,
the key points (a chart's rubric), the chart the judge saw or the output and reference files,
and the model's answer. Never the judge's verdict, score, reason or name, nor the system."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from deskbench.contract.web import WebScreens

if TYPE_CHECKING:
    from deskbench.scoring.judge_calibration import CalibrationItem

TEMPLATES = Path(__file__).resolve().parent / "templates"


class AnalyticsScreens(WebScreens):
    def calibration_item(self, item: CalibrationItem, n: int) -> str | None:
        from deskbench.web.common import templates

        shown = {"question": item.question, "category": item.category, "reference": item.reference,
                 "key_points": item.key_points, "answer": item.answer or "", "chart": item.chart_path is not None,
                 "files": [w for w, path in (("output", item.output_file), ("reference", item.reference_file))
                           if path is not None]}
        return templates(TEMPLATES).get_template("calibration_body.html").render(n=n, item=shown)


SCREENS = AnalyticsScreens()
