"""matplotlib on the Agg backend (no display on servers and in CI) and a save that turns an
unwritable path into one clear UserError line."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from deskbench.errors import UserError


def pyplot() -> ModuleType:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path) -> None:
    plt = pyplot()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}; choose another --plot path") from exc
    finally:
        plt.close(fig)
