"""Annotator batches (MADQA C.2: 500 questions in 20 batches of 25, each with a constellation code
name for anonymised tracking). A batch is a fixed, ordered list of task ids; an annotator sees only
the batches assigned to them. Persistence lives in web/store.py; this module only cuts batches.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

# The 88 IAU constellations, in the order names are handed out.
CONSTELLATIONS = (
    "Aquarius", "Orion", "Phoenix", "Andromeda", "Cassiopeia", "Cygnus", "Draco", "Lyra", "Pegasus",
    "Perseus", "Scorpius", "Taurus", "Gemini", "Leo", "Virgo", "Libra", "Sagittarius", "Capricornus",
    "Aries", "Pisces", "Cancer", "Hydra", "Aquila", "Auriga", "Bootes", "Carina", "Centaurus",
    "Cepheus", "Cetus", "Columba", "Corvus", "Crater", "Crux", "Delphinus", "Dorado", "Eridanus",
    "Fornax", "Grus", "Hercules", "Horologium", "Hydrus", "Indus", "Lacerta", "LeoMinor", "Lepus",
    "Lupus", "Lynx", "Mensa", "Microscopium", "Monoceros", "Musca", "Norma", "Octans", "Ophiuchus",
    "Pavo", "Pictor", "PiscisAustrinus", "Puppis", "Pyxis", "Reticulum", "Sagitta", "Sculptor",
    "Scutum", "Serpens", "Sextans", "Telescopium", "Triangulum", "TriangulumAustrale", "Tucana",
    "UrsaMajor", "UrsaMinor", "Vela", "Volans", "Vulpecula", "Antlia", "Apus", "Ara", "Caelum",
    "Camelopardalis", "CanesVenatici", "CanisMajor", "CanisMinor", "Chamaeleon", "Circinus",
    "ComaBerenices", "CoronaAustralis", "CoronaBorealis", "Equuleus",
)


@dataclass(frozen=True)
class Batch:
    name: str
    task_ids: tuple[str, ...]
    users: tuple[str, ...] = ()


def batch_names(taken: set[str]) -> list[str]:
    """Free code names: the constellations first, then the same names with -2, -3, ..."""
    names: list[str] = []
    for round_ in range(1, 1000):
        suffix = "" if round_ == 1 else f"-{round_}"
        names.extend(n + suffix for n in CONSTELLATIONS if n + suffix not in taken)
        if len(names) > 10_000:
            break
    return names


def cut_batches(task_ids: Sequence[str], size: int, taken: set[str], seed: int | None = None) -> list[Batch]:
    """Consecutive batches of at most `size` tasks (in the given order, or shuffled under `seed`)."""
    if size < 1:
        raise ValueError("batch size must be 1 or more")
    ids = list(task_ids)
    if seed is not None:
        random.Random(seed).shuffle(ids)
    chunks = [ids[i:i + size] for i in range(0, len(ids), size)]
    return [Batch(name=name, task_ids=tuple(chunk)) for name, chunk in zip(batch_names(taken), chunks, strict=False)]
