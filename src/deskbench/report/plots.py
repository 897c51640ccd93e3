"""What every track's report figures share: a matplotlib figure as PNG bytes (Agg, no metadata),
so the page can embed it as a data URI and render with no network and no files beside it. Each
track draws its own figures (tracks/<name>/report*.py)."""

from __future__ import annotations

import io
from typing import Any

from deskbench.analysis.plotting import pyplot


def png(fig: Any) -> bytes:
    """`fig` as PNG bytes; the figure is closed."""
    plt = pyplot()
    try:
        buf = io.BytesIO()
        # No timestamp or software metadata: the same report gives the same bytes.
        fig.savefig(buf, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
        return buf.getvalue()
    finally:
        plt.close(fig)


def empty(ax: Any, text: str) -> None:
    """A note in the middle of axes that have nothing to draw."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#555")
