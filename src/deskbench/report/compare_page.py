"""`deskbench compare -o PAGE.html`: the comparison as a self-contained HTML page (no JavaScript,
nothing fetched), drawn by templates/compare.html.j2 around the section templates/
_comparison.html.j2, which a report page can include as it is (it reads only a `Comparison`)."""

from __future__ import annotations

from pathlib import Path

from deskbench.analysis.compare import Comparison
from deskbench.errors import UserError


def pvalue(p: float | None) -> str:
    if p is None:
        return "–"
    return f"{p:.2e}" if p < 1e-3 else f"{p:.4f}"


def points(x: float | None, ci: tuple[float, float] | None = None) -> str:
    """A difference of shares in percentage points, signed, with its interval."""
    if x is None:
        return "–"
    text = f"{100 * x:+.1f}"
    return text + (f" [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]" if ci is not None else "")


def render_compare_html(comparison: Comparison) -> str:
    from deskbench.report.render import _env

    env = _env()
    env.filters.update(pvalue=pvalue, points=points)
    return env.get_template("compare.html.j2").render(c=comparison)


def write_compare_page(comparison: Comparison, path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_compare_html(comparison), encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}; choose another -o path") from exc
