"""The report as one self-contained HTML page: CSS inline, plots as base64 PNG data URIs, no
JavaScript, nothing fetched, so it opens from an e-mail or an air-gapped machine."""

from __future__ import annotations

import base64
import math
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from deskbench.errors import UserError
from deskbench.models.prices import UNKNOWN, format_cost
from deskbench.report import plots
from deskbench.report.madqa import madqa_pngs
from deskbench.report.models import ERROR_CLASSES, Report
from deskbench.report.taxonomy import RULES, SAYS_NOT_FOUND_RULE
from deskbench.tasks.deliverables import RUBRIC_CODES
from deskbench.tracks.analytics.scoring.analytics import ERROR_CATEGORIES


def _missing(x: float | None) -> bool:
    return x is None or math.isnan(x)


def pct(x: float | None, ci: tuple[float, float] | None = None) -> str:
    """A share as a percentage, with the half-width of its interval when given."""
    if _missing(x):
        return "–"
    text = f"{100 * x:.1f}"  # type: ignore[operator]
    if ci is not None:
        text += f" ± {100 * (ci[1] - ci[0]) / 2:.1f}"
    return text


def num(x: float | None, digits: int = 1) -> str:
    return "–" if _missing(x) else f"{x:,.{digits}f}"


def money(x: float | None, known: bool = True) -> str:
    """USD to 4 places; "?" when the cost is unknown (`known` False: a model without a price),
    "–" when there is nothing to show (no episodes, no correct answers)."""
    if not known:
        return UNKNOWN
    return "–" if _missing(x) else format_cost(x)


def interval(ci: tuple[float, float] | None, digits: int = 1, scale: float = 1.0) -> str:
    """A 95% interval as " [lo, hi]", or nothing when there is none."""
    if ci is None or _missing(ci[0]) or _missing(ci[1]):
        return ""
    return f" [{scale * ci[0]:.{digits}f}, {scale * ci[1]:.{digits}f}]"


def pvalue(p: float | None) -> str:
    """A p-value: 4 decimals, scientific below 0.001."""
    if _missing(p):
        return "–"
    return f"{p:.2e}" if p < 1e-3 else f"{p:.4f}"  # type: ignore[operator]


def points(x: float | None, ci: tuple[float, float] | None = None) -> str:
    """A difference of shares in percentage points, signed, with its interval."""
    if _missing(x):
        return "–"
    text = f"{100 * x:+.1f}"  # type: ignore[operator]
    return text + (f" [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]" if ci is not None else "")


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _env() -> Environment:
    env = Environment(loader=PackageLoader("deskbench.report", "templates"),
                      autoescape=select_autoescape(["html", "j2"]), undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters.update(pct=pct, num=num, money=money, interval=interval, pvalue=pvalue, points=points)
    return env


# Leaderboard columns marked when best (MADQA Table 3 bolds the best system): higher is better,
# except for Kuiper.
BEST_COLUMNS = {"accuracy": max, "cross_page": max, "cross_doc": max, "page_f1": max, "doc_f1": max, "kuiper": min}


def best_values(report: Report, task_set: int = 0) -> dict[str, float | None]:
    """The best value of each marked column among the systems of one task set (systems that ran
    other tasks are not ranked against them); None when fewer than two systems have one."""
    out: dict[str, float | None] = {}
    for column, pick in BEST_COLUMNS.items():
        values = [v for s in report.systems if s.row.task_set == task_set and (v := getattr(s.row, column)) is not None]
        out[column] = pick(values) if len(values) > 1 else None
    return out


def render_html(report: Report) -> str:
    systems = report.systems
    images = {}
    if systems:
        images |= {
            "kuiper": data_uri(plots.kuiper_png([s.kuiper_curve for s in systems])),
            "budget": data_uri(plots.budget_png([s.budget for s in systems])),
            "errors": data_uri(plots.errors_png([s.errors for s in systems])),
        }
    if report.madqa is not None:
        images |= {f"madqa_{name}": data_uri(png) for name, png in madqa_pngs(report.madqa).items()}
    if report.analytics:
        images |= {
            "analytics_pass": data_uri(plots.analytics_pass_png(report.analytics)),
            "analytics_errors": data_uri(plots.analytics_errors_png(report.analytics)),
        }
    if report.deliverables is not None and report.deliverables.graded:
        images["deliverables_class"] = data_uri(plots.deliverables_class_png(report.deliverables))
    breakdowns = [
        ("domain", "domain", sorted({g for s in systems for g in s.by_domain})),
        ("category", "category", sorted({g for s in systems for g in s.by_category})),
    ]
    return _env().get_template("report.html.j2").render(
        report=report, images=images, classes=ERROR_CLASSES, rules=RULES, not_found_rule=SAYS_NOT_FOUND_RULE,
        breakdowns=breakdowns,
        best={t.index: best_values(report, t.index) for t in report.task_sets} or {0: best_values(report)},
        error_categories=ERROR_CATEGORIES,
        analytics_titles=plots.ANALYTICS_TITLES, rubric_codes=RUBRIC_CODES,
    )


def write_page(html: str, path: Path) -> None:
    """An HTML page to `path`; a path that cannot be written is the user's to change (-o)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}; choose another -o path") from exc


def write_report(report: Report, path: Path) -> None:
    write_page(render_html(report), path)
