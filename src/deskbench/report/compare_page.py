"""`deskbench compare --output PAGE.html`: the comparison as a self-contained HTML page (no JavaScript,
nothing fetched): templates/compare.html.j2 around templates/_comparison.html.j2, the section
`deskbench report` also shows for each track with two or more systems."""

from __future__ import annotations

from pathlib import Path

from deskbench.analysis.compare import Comparison
from deskbench.report.render import _env, write_page


def render_compare_html(comparison: Comparison) -> str:
    return _env().get_template("compare.html.j2").render(c=comparison)


def write_compare_page(comparison: Comparison, path: Path) -> None:
    write_page(render_compare_html(comparison), path)
