"""The CLI's two consoles (results on stdout, messages on stderr), one home for every command module."""

from __future__ import annotations

from rich.console import Console

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)
