"""USD prices per million tokens, by model name, for the cost column of every report.

The built-in table states its date (PRICES_AS_OF): what the providers published on that day.
Prices change, so users extend or override it with a JSON file
({"model-name": [input_per_mtok, output_per_mtok], ...}) given with --prices or DESKBENCH_PRICES.

A model with no price has an unknown cost: `Usage.cost_usd` is None and `cost_known` False,
never 0. Any total, mean or per-item cost that includes an unknown cost is unknown too (None in
JSON, "?" on screen and in the report); a model priced at 0 (the local SmolLM2) costs a known $0.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from pathlib import Path

from deskbench.errors import UserError

PRICES_AS_OF = "2025-11-24"
"""The day every price in BUILTIN was the provider's published list price (standard tier, no
batch or cache discount, prompts up to 200k tokens): the day Claude Opus 4.5, the newest entry,
came out at $5/$25."""

UNKNOWN = "?"
"""How an unknown cost is shown (on screen and in the report)."""

# Sources, each checked for the price it had on PRICES_AS_OF:
#   OpenAI:    https://platform.openai.com/docs/pricing and the model pages under
#              https://platform.openai.com/docs/models/ (e.g. .../models/gpt-5.1)
#   Anthropic: https://docs.claude.com/en/docs/about-claude/pricing and
#              https://www.anthropic.com/news/claude-opus-4-5 (2025-11-24)
#   Google:    https://ai.google.dev/gemini-api/docs/pricing (paid tier)
#   Mistral:   https://docs.mistral.ai/models (the models pages' pricing)
# Names match by the longest entry a model name starts with, so an entry for a variant that
# costs something else (gpt-5-pro, o3-pro, o3-mini, gemini-2.5-flash-lite) must be listed, or it
# would take its family's price.
BUILTIN: dict[str, tuple[float, float]] = {
    # OpenAI, platform.openai.com/docs/pricing
    "gpt-5.1": (1.25, 10.0),  # docs/models/gpt-5.1 (released 2025-11-13, GPT-5's price)
    "gpt-5": (1.25, 10.0),  # docs/models/gpt-5
    "gpt-5-mini": (0.25, 2.0),  # docs/models/gpt-5-mini
    "gpt-5-nano": (0.05, 0.40),  # docs/models/gpt-5-nano
    "gpt-5-pro": (15.0, 120.0),  # docs/models/gpt-5-pro
    "gpt-4.1": (2.0, 8.0),  # docs/models/gpt-4.1
    "gpt-4.1-mini": (0.40, 1.60),  # docs/models/gpt-4.1-mini
    "gpt-4.1-nano": (0.10, 0.40),  # docs/models/gpt-4.1-nano
    "gpt-4o": (2.50, 10.0),  # docs/models/gpt-4o
    "gpt-4o-mini": (0.15, 0.60),  # docs/models/gpt-4o-mini
    "o3": (2.0, 8.0),  # docs/models/o3 (after the 80% cut of 2025-06-10; was $10/$40)
    "o3-pro": (20.0, 80.0),  # docs/models/o3-pro
    "o3-mini": (1.10, 4.40),  # docs/models/o3-mini
    "o4-mini": (1.10, 4.40),  # docs/models/o4-mini
    "o3-deep-research": (10.0, 40.0),  # docs/models/o3-deep-research (the consulting paper's o3 agent)
    "o4-mini-deep-research": (2.0, 8.0),  # docs/models/o4-mini-deep-research
    # Anthropic, docs.claude.com/en/docs/about-claude/pricing ("Base Input Tokens", "Output Tokens")
    "claude-opus-4-5": (5.0, 25.0),  # anthropic.com/news/claude-opus-4-5, the pricing page
    "claude-opus-4-1": (15.0, 75.0),  # pricing page
    "claude-sonnet-4-5": (3.0, 15.0),  # pricing page (prompts <= 200k tokens; $6/$22.50 above)
    "claude-haiku-4-5": (1.0, 5.0),  # pricing page
    # Google, ai.google.dev/gemini-api/docs/pricing (paid tier, text input)
    "gemini-3-pro": (2.0, 12.0),  # gemini-3-pro-preview, prompts <= 200k tokens ($4/$18 above)
    "gemini-2.5-pro": (1.25, 10.0),  # prompts <= 200k tokens ($2.50/$15 above)
    "gemini-2.5-flash": (0.30, 2.50),
    "gemini-2.5-flash-lite": (0.10, 0.40),
    # Mistral, docs.mistral.ai/models (the model's "pricing" in github.com/mistralai/platform-docs-public
    # src/schema/models/models/pixtral-large-24-11.ts; the price since its release on 2024-11-18)
    "pixtral-large": (2.0, 6.0),  # pixtral-large-2411 / pixtral-large-latest, the MADQA scripts' Mistral default
    # local, runs on this machine
    "smollm2-135m-instruct": (0.0, 0.0),
}


def total_cost(costs: Iterable[float | None]) -> float | None:
    """The sum of some costs, or None (unknown) when any of them is unknown."""
    total = 0.0
    for cost in costs:
        if cost is None:
            return None
        total += cost
    return total


def per(cost: float | None, count: float) -> float | None:
    """A cost divided over `count` things (items, correct answers): None when the cost is unknown
    or there is nothing to divide by."""
    return cost / count if cost is not None and count else None


def format_cost(cost: float | None, digits: int = 4, *, dollar: bool = True) -> str:
    """"$0.0123", or "?" for an unknown cost (never "$0.0000")."""
    if cost is None or math.isnan(cost):
        return UNKNOWN
    return f"{'$' if dollar else ''}{cost:.{digits}f}"


def cost_summary(cost: float | None) -> str:
    """A run's cost for its summary line, with the price table's date:
    "cost $0.0123 (prices as of 2025-11-24; --prices FILE to extend)", or "cost ? (...)" when
    a model had no price."""
    if cost is None:
        return (f"cost {UNKNOWN} (a model has no price in the table as of {PRICES_AS_OF}; "
                "--prices FILE to add it)")
    return f"cost {format_cost(cost)} (prices as of {PRICES_AS_OF}; --prices FILE to extend)"


FREE_PROVIDERS = frozenset({"scripted"})
"""Providers whose calls cost a known $0 whatever the model's name (a scripted model is named by
its file, whose stem may start like a priced model's)."""


class PriceTable:
    def __init__(self, extra: dict[str, tuple[float, float]] | None = None) -> None:
        self.prices = {**BUILTIN, **(extra or {})}
        self._found: dict[str, tuple[float, float] | None] = {}  # price() by model: it runs on every call

    @classmethod
    def load(cls, path: Path | None = None) -> PriceTable:
        path = path or (Path(os.environ["DESKBENCH_PRICES"]) if os.environ.get("DESKBENCH_PRICES") else None)
        if path is None:
            return cls()
        return cls(read_price_file(path))

    def price(self, model: str) -> tuple[float, float] | None:
        """The longest table entry that the model name starts with (dated versions match)."""
        if model in self._found:  # the table is not changed once built
            return self._found[model]
        if model.partition("/")[0] in FREE_PROVIDERS:
            return (0.0, 0.0)
        name = model.rsplit("/", 1)[-1].lower()
        matches = [k for k in self.prices if name.startswith(k.lower())]
        found = self._found[model] = self.prices[max(matches, key=len)] if matches else None
        return found

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> float | None:
        """USD for one call; None when the model has no price."""
        p = self.price(model)
        if p is None:
            return None
        return (input_tokens * p[0] + output_tokens * p[1]) / 1_000_000


_SHAPE = '{"my-model": [0.5, 1.5]} (USD per million input and output tokens)'


def read_price_file(path: Path) -> dict[str, tuple[float, float]]:
    """A price file: a JSON object, each model name to [input, output] USD per million tokens.
    Anything else is a UserError of one line naming the file, the problem and the shape."""
    def bad(problem: str) -> UserError:
        return UserError(f"price file {path} is unreadable ({problem}); expected JSON like {_SHAPE}")

    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise bad(exc.strerror or type(exc).__name__) from exc
    except UnicodeDecodeError as exc:
        raise bad("not UTF-8 text") from exc
    except json.JSONDecodeError as exc:
        raise bad(f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    if not isinstance(raw, dict):
        raise bad(f"a JSON {type(raw).__name__}, not an object")
    out: dict[str, tuple[float, float]] = {}
    for name, value in raw.items():
        if (not isinstance(value, list | tuple) or len(value) != 2
                or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
                or not all(math.isfinite(v) and v >= 0 for v in value)):
            raise bad(f"{json.dumps(name)}: {json.dumps(value)[:60]} is not two prices >= 0")
        out[str(name)] = (float(value[0]), float(value[1]))
    return out
