"""USD prices per million tokens, by model name, for the cost column of every report.

The built-in table is what providers published as of late 2025; prices change, so users extend
or override it with a JSON file ({"model-name": [input_per_mtok, output_per_mtok], ...}) given
with --prices or DESKBENCH_PRICES. A model with no price costs 0 and is marked cost_known=False.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from deskbench.errors import UserError

BUILTIN: dict[str, tuple[float, float]] = {
    "gpt-5": (1.25, 10.0),
    "gpt-5-mini": (0.25, 2.0),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4o": (2.50, 10.0),
    "gpt-4o-mini": (0.15, 0.60),
    "claude-sonnet-4-5": (3.0, 15.0),
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-opus-4-1": (15.0, 75.0),
    "gemini-2.5-pro": (1.25, 10.0),
    "gemini-2.5-flash": (0.30, 2.50),
    "smollm2-135m-instruct": (0.0, 0.0),
}


class PriceTable:
    def __init__(self, extra: dict[str, tuple[float, float]] | None = None) -> None:
        self.prices = {**BUILTIN, **(extra or {})}

    @classmethod
    def load(cls, path: Path | None = None) -> PriceTable:
        path = path or (Path(os.environ["DESKBENCH_PRICES"]) if os.environ.get("DESKBENCH_PRICES") else None)
        if path is None:
            return cls()
        try:
            raw = json.loads(path.read_text())
            extra = {str(k): (float(v[0]), float(v[1])) for k, v in raw.items()}
        except (OSError, ValueError, TypeError, IndexError, AttributeError) as exc:
            raise UserError(
                f"price file {path} is unreadable ({exc}); expected JSON like "
                '{"my-model": [0.5, 1.5]} (USD per million input and output tokens)'
            ) from exc
        return cls(extra)

    def price(self, model: str) -> tuple[float, float] | None:
        """The longest table entry that the model name starts with (dated versions match)."""
        name = model.rsplit("/", 1)[-1].lower()
        matches = [k for k in self.prices if name.startswith(k.lower())]
        return self.prices[max(matches, key=len)] if matches else None

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> float | None:
        p = self.price(model)
        if p is None:
            return None
        return (input_tokens * p[0] + output_tokens * p[1]) / 1_000_000
