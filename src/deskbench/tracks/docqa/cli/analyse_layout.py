"""`deskbench analyse layout`: layout-element density by document category and domain (MADQA B.2,
Eq. 7-8, Figures 2 and 11), a thin shell over analysis/layout_density.py; registered with the other
appendix analyses (analyse_madqa.py register)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from deskbench.tracks.docqa.cli.analyse_madqa import JsonOpt, OutOpt, _deliver, _wanted
from deskbench.tracks.docqa.cli.analyse_more import CorpusOpt, PlotOpt, TasksOpt

if TYPE_CHECKING:
    from deskbench.tracks.docqa.analysis.layout_density import LayoutDensity, LayoutTable


def _top(table: LayoutTable) -> Iterator[str]:
    for g in table.groups:
        if not table.elements:
            continue
        high = max(table.elements, key=lambda e: g.z[e])
        low = min(table.elements, key=lambda e: g.z[e])
        yield (f"{table.grouping} {g.name} ({g.docs} docs, {g.pages} pages): most above the mean: {high} "
               f"{g.density[high]:.2f}/page (z {g.z[high]:+.2f}); most below: {low} {g.density[low]:.2f}/page "
               f"(z {g.z[low]:+.2f})")


def _lines(report: LayoutDensity) -> Iterator[str]:
    yield f"layout elements from {report.detector}" + (f"; {report.fallback}" if report.fallback else "")
    yield f"{report.documents} documents, {report.pages} pages" + (
        f"; {len(report.unread)} documents not read as PDFs (in no row), e.g. {report.unread[0]}" if report.unread else "")
    yield from _top(report.by_category)
    yield from _top(report.by_domain)


def layout(tasks: TasksOpt, corpus: CorpusOpt, output: OutOpt = None, plot: PlotOpt = None, as_json: JsonOpt = False) -> None:
    """Layout elements per page by document category and domain, z-scored per element (MADQA B.2, Figures 2 and 11)."""
    from deskbench.tracks.docqa.analysis.layout_density import layout_figure, load_layout_density

    _wanted(output, as_json)
    _deliver(load_layout_density(tasks, corpus), layout_figure, _lines, output, plot, as_json)
