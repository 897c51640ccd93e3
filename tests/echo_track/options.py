"""The echo track's own flags of `deskbench run`, declared here and nowhere else: the CLI builds
`--limit` and `--suffix` from this model (cli/track_flags.py), and `prepare` gets an instance."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from deskbench.contract.options import TrackOptions


class EchoRunOptions(TrackOptions):
    """`deskbench run` on echo tasks."""

    limit: Annotated[int | None, Field(description="echo: only the first N tasks.")] = None
    suffix: Annotated[str, Field(description="echo: text every answer ends with (the agents add it).")] = ""
