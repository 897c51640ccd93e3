"""The report as one self-contained HTML page: CSS inline, plots as base64 PNG data URIs, no
JavaScript, nothing fetched, so it opens from an e-mail or an air-gapped machine."""

from __future__ import annotations

import base64
import importlib.resources
import math
from functools import cache
from pathlib import Path
from urllib.parse import urlencode

from jinja2 import (
    ChoiceLoader,
    Environment,
    FunctionLoader,
    PackageLoader,
    StrictUndefined,
    pass_context,
    select_autoescape,
)
from jinja2.runtime import Context
from markupsafe import Markup, escape

from deskbench.errors import UserError
from deskbench.models.prices import UNKNOWN, format_cost
from deskbench.report.models import Report, ReportSection


def _missing(x: float | None) -> bool:
    return x is None or math.isnan(x)


def pct(x: float | None, ci: tuple[float, float] | None = None) -> str:
    """A share as a percentage, with the half-width of its interval when given."""
    if x is None or _missing(x):
        return "–"
    text = f"{100 * x:.1f}"
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
    if p is None or _missing(p):
        return "–"
    return f"{p:.2e}" if p < 1e-3 else f"{p:.4f}"


def points(x: float | None, ci: tuple[float, float] | None = None) -> str:
    """A difference of shares in percentage points, signed, with its interval."""
    if x is None or _missing(x):
        return "–"
    text = f"{100 * x:+.1f}"
    return text + (f" [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]" if ci is not None else "")


@pass_context
def episodes(ctx: Context, text: object, **query: object) -> Markup:
    """`text` linked to its episodes in a running `deskbench view` (the table filtered by `query`:
    system, error class) when the report was written with --viewer-url; else `text` alone, so the
    report stays a standalone file."""
    base = ctx.get("viewer_url")
    if not base:
        return escape(text)
    from deskbench.redact import redact_url

    base = redact_url(str(base))  # the report is a file that travels: no credentials in its links
    href = f"{base.rstrip('/')}/?{urlencode({k: v for k, v in query.items() if v is not None})}"
    return Markup('<a class="episodes" href="{}">{}</a>').format(href, text)


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _package_template(name: str) -> str | None:
    """A template shipped in a package, named "package:file" (a track's own section template:
    "deskbench.tracks.docqa:report.html.j2"); None for any other name."""
    package, sep, file = name.partition(":")
    if not sep:
        return None
    try:
        return importlib.resources.files(package).joinpath(file).read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError):
        return None


@cache
def _env() -> Environment:
    """report/templates by name, and a track's templates as "package:file" (FunctionLoader)."""
    env = Environment(loader=ChoiceLoader([PackageLoader("deskbench.report", "templates"),
                                           FunctionLoader(_package_template)]),
                      autoescape=select_autoescape(["html", "j2"], default_for_string=True, default=True),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(pct=pct, num=num, money=money, interval=interval, pvalue=pvalue, points=points,
                       episodes=episodes)
    return env


def render_section(section: ReportSection, viewer_url: str | None = None) -> Markup:
    """A section's body: its template over `section`, `d` (its data), `images` (its figures as data
    URIs), `viewer_url` (where `|episodes` links go) and the data's own context. Empty for a
    section without a template."""
    if section.template is None:
        return Markup("")
    images = {name: data_uri(png) for name, png in section.data.figures().items()}
    html = _env().get_template(section.template).render(section=section, d=section.data, images=images,
                                                        viewer_url=viewer_url, **section.data.context())
    return Markup(html if html.endswith("\n") else html + "\n")  # the next section starts on a line of its own


def render_html(report: Report, viewer_url: str | None = None) -> str:
    """The page: every section's body in the order of the sections, then every Comparison, the
    model settings and the footer. With `viewer_url` (a running `deskbench view`), leaderboard rows
    and bad cases link to their episodes there."""
    return _env().get_template("report.html.j2").render(
        report=report, bodies=[render_section(s, viewer_url) for s in report.sections])


def write_page(html: str, path: Path) -> None:
    """An HTML page to `path`; a path that cannot be written is the user's to change (-o)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}; choose another --output path") from exc


def write_report(report: Report, path: Path, viewer_url: str | None = None) -> None:
    write_page(render_html(report, viewer_url), path)
