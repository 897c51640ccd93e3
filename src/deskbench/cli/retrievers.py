"""`deskbench convert`: a colpali_engine adapter (vidore/colqwen2.5-v0.2, vidore/colpali, ...) merged
into its base as a transformers-format folder the visual retrievers load (search/embedded/convert.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from deskbench.console import err, out


def register(app: typer.Typer) -> None:
    """Add `deskbench convert`."""

    @app.command()
    def convert(
        adapter: Annotated[str, typer.Argument(help="The colpali_engine adapter: a folder, or a hub name in the "
                                                    "local Hugging Face cache (e.g. vidore/colqwen2.5-v0.2).")],
        output: Annotated[Path, typer.Option("--out", "-o", help="The folder to write the transformers model into "
                                                                 "(new or empty).")],
        base: Annotated[str | None, typer.Option("--base", help="The base model (folder or hub name); default: the "
                                                                "one adapter_config.json names.")] = None,
        download: Annotated[bool, typer.Option("--download", help="Fetch the adapter or the base from the Hugging "
                                                                  "Face hub when not in the local cache.")] = False,
    ) -> None:
        """Merge a colpali_engine LoRA adapter into its base (W += B A alpha/r) and write a transformers
        ColQwen2ForRetrieval / ColPaliForRetrieval folder with its processor, for --retriever
        colqwen=OUT or colpali=OUT. HEAVEN's vidore/colqwen2.5-v0.2 and MDocAgent's vidore/colpali
        are published this way. Nothing is downloaded without --download."""
        from deskbench.search.embedded.convert import convert as run_convert

        done = run_convert(adapter, output, base=base, allow_download=download,
                           progress=lambda line: err.print(escape(line)))
        out.print(f"converted {escape(adapter)} ({done.lora_modules} LoRA modules merged, {done.embedding_dim}-d "
                  f"vectors) to {escape(str(done.out))}")
        out.print(f"use it with: --retriever {escape(done.spec())}")
