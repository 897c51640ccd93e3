"""colpali_engine checkpoints as transformers-format folders (`deskbench convert`).

The models MADQA's baselines name are published in colpali_engine's layout: a PEFT LoRA adapter
(adapter_config.json + adapter_model.safetensors, keys `base_model.model.<module>.lora_A.weight`)
over a base checkpoint saved by colpali_engine's own classes (ColQwen2_5 / ColQwen2 over Qwen2.5-VL /
Qwen2-VL, ColPali over PaliGemma, with the projection named `custom_text_proj`). HEAVEN re-ranks
with vidore/colqwen2.5-v0.2 (base vidore/colqwen2.5-base); MDocAgent retrieves images with
vidore/colpali (v1.0, base vidore/colpaligemma-3b-mix-448-base). transformers' ColQwen2ForRetrieval
and ColPaliForRetrieval, which late_visual.py loads, read neither, so this module merges the
adapter into its base and writes what they read:

1. for each LoRA pair, W += (B @ A) * lora_alpha / r (alpha / sqrt(r) with use_rslora; rank_pattern
   and alpha_pattern honoured), computed in float32 and stored in the base's dtype; a module in
   modules_to_save replaced by the adapter's copy;
2. keys renamed to the transformers class's names (both colpali_engine layouts: the one the hub's
   checkpoints were saved in, `model.layers...` / `model.language_model.model...`, and the one later
   colpali_engine releases map it to), the checked against the class's own parameter names, so a
   key left over or missing is an error, never a silently random weight;
3. the config wrapped as ColQwen2Config / ColPaliConfig (vlm_config = the base's, embedding_dim =
   the projection's width), the processor (tokenizer and image processor, from the adapter folder
   where colpali_engine saves them, else the base's) saved as ColQwen2Processor / ColPaliProcessor.

Inputs are local folders or hub names already in the local Hugging Face cache; nothing is
downloaded unless asked. No peft, no colpali_engine and no remote code are needed. An adapter given
straight to `--retriever` (visual.find_model) is converted once into deskbench's cache (`converted`).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deskbench.errors import UserError
from deskbench.search.embedded.dense import local_model

if TYPE_CHECKING:
    import torch

ADAPTER_CONFIG = "adapter_config.json"


@dataclass(frozen=True)
class Family:
    """One colpali_engine model family and the transformers classes that read it once converted."""

    kind: str  # the --retriever kind that loads the result
    base_types: tuple[str, ...]  # the base config's model_type
    config_class: str
    model_class: str
    processor_class: str
    rules: tuple[tuple[str, str | None], ...]  # (regex, replacement or None = not kept), first match wins


COLQWEN = Family("colqwen", ("qwen2_vl", "qwen2_5_vl"), "ColQwen2Config", "ColQwen2ForRetrieval", "ColQwen2Processor", (
    (r"^custom_text_proj\.", "embedding_proj_layer."),
    (r"^(model\.)?lm_head\.", None),  # ColQwen2ForRetrieval's backbone is the bare model: no LM head
    (r"^model\.language_model\.", "vlm.language_model."),  # Qwen*VLForConditionalGeneration, newer layout
    (r"^model\.visual\.", "vlm.visual."),
    (r"^model\.", "vlm.language_model."),  # the hub's layout: ColQwen2_5 saved as Qwen2.5-VL was before 4.52
    (r"^language_model\.", "vlm.language_model."),  # colpali_engine's ColQwen2_5(Qwen2_5_VLModel) names
    (r"^visual\.", "vlm.visual."),
))
COLPALI = Family("colpali", ("paligemma",), "ColPaliConfig", "ColPaliForRetrieval", "ColPaliProcessor", (
    (r"^custom_text_proj\.", "embedding_proj_layer."),
    (r"^model\.(language_model\.)?lm_head\.", None),  # tied to the embeddings; ColPaliForRetrieval has none
    (r"^model\.language_model\.model\.", "vlm.language_model."),  # the hub's layout: ColPali.model = PaliGemmaForCG
    (r"^model\.model\.language_model\.", "vlm.language_model."),  # colpali_engine's mapping of it, later releases
    (r"^model\.(model\.)?vision_tower\.vision_model\.", "vlm.vision_tower."),
    (r"^model\.(model\.)?vision_tower\.", "vlm.vision_tower."),
    (r"^model\.(model\.)?multi_modal_projector\.", "vlm.multi_modal_projector."),
))
FAMILIES: dict[str, Family] = {t: f for f in (COLQWEN, COLPALI) for t in f.base_types}


def rename(family: Family, key: str) -> str | None:
    """A colpali_engine key as the transformers class names it (None: a weight it has no place for)."""
    for pattern, replacement in family.rules:
        if re.match(pattern, key):
            return None if replacement is None else re.sub(pattern, replacement, key, count=1)
    raise UserError(f"the base checkpoint has a weight {key!r} this converter does not know for a {family.kind} "
                    "model; the checkpoint is not in colpali_engine's layout (report it with the model's name)")


@dataclass(frozen=True)
class Lora:
    """adapter_config.json's settings that change the merged weights."""

    r: int
    alpha: float
    target_modules: str | list[str]
    modules_to_save: list[str]
    rslora: bool
    rank_pattern: dict[str, int]
    alpha_pattern: dict[str, float]
    base: str | None

    @classmethod
    def read(cls, folder: Path) -> Lora:
        where = folder / ADAPTER_CONFIG
        if not where.is_file():
            raise UserError(f"convert: {folder} is not an adapter (no {ADAPTER_CONFIG}); give the folder of a "
                            "colpali_engine checkpoint such as vidore/colqwen2.5-v0.2 or vidore/colpali")
        try:
            data = json.loads(where.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UserError(f"convert: {where} is unreadable ({exc}); download the adapter again") from None
        if data.get("peft_type") != "LORA":
            raise UserError(f"convert: {where} is a {data.get('peft_type')!r} adapter, not LoRA; only LoRA "
                            "adapters (colpali_engine's) can be merged")
        for flag in ("use_dora", "fan_in_fan_out", "lora_bias"):
            if data.get(flag):
                raise UserError(f"convert: {where} sets {flag}, which colpali_engine's adapters never do and this "
                                "converter does not merge; convert it with peft's merge_and_unload instead")
        return cls(r=int(data["r"]), alpha=float(data["lora_alpha"]), target_modules=data.get("target_modules") or [],
                   modules_to_save=list(data.get("modules_to_save") or []), rslora=bool(data.get("use_rslora")),
                   rank_pattern=dict(data.get("rank_pattern") or {}), alpha_pattern=dict(data.get("alpha_pattern") or {}),
                   base=data.get("base_model_name_or_path"))

    def targets(self, module: str) -> bool:
        """Whether target_modules names `module` (a regex is matched whole, as peft does; a list by suffix)."""
        if isinstance(self.target_modules, str):
            return re.fullmatch(self.target_modules, module) is not None
        return any(module == t or module.endswith(f".{t}") for t in self.target_modules)

    def scale(self, module: str) -> float:
        """alpha / r for `module` (per-module patterns first, rsLoRA's square root when set)."""
        def pick(pattern: dict[str, Any], default: float) -> float:
            for key, value in pattern.items():
                if re.fullmatch(rf"(.*\.)?{key}", module):
                    return float(value)
            return default

        r, alpha = pick(self.rank_pattern, self.r), pick(self.alpha_pattern, self.alpha)
        return alpha / (math.sqrt(r) if self.rslora else r)


def local_folder(model: str, what: str, *, allow_download: bool, download_flag: str = "--download") -> Path:
    """`model` as a folder, else a hub name's snapshot in the local Hugging Face cache (fetched only
    when `allow_download`): dense.local_model, worded for `convert`."""
    return local_model(model, f"convert: the {what} {model!r}", allow_download=allow_download,
                       download_flag=download_flag)


def read_tensors(folder: Path, what: str) -> dict[str, torch.Tensor]:
    """Every tensor of a folder's *.safetensors files (sharded checkpoints included)."""
    from safetensors.torch import load_file

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise UserError(f"convert: the {what} {folder} has no .safetensors file; give the folder the hub "
                        "snapshot (or save_pretrained) wrote")
    tensors: dict[str, torch.Tensor] = {}
    for file in files:
        tensors.update(load_file(str(file)))
    return tensors


PEFT_PREFIX = "base_model.model."


def merge(base: dict[str, torch.Tensor], adapter: dict[str, torch.Tensor], lora: Lora) -> dict[str, torch.Tensor]:
    """The base's weights with the adapter merged in, keys as the base names them (the adapter's
    module names are the base's: both come from colpali_engine's classes)."""

    merged = dict(base)
    pairs: dict[str, dict[str, torch.Tensor]] = {}
    for key, tensor in adapter.items():
        if not key.startswith(PEFT_PREFIX):
            raise UserError(f"convert: the adapter's weight {key!r} does not start with {PEFT_PREFIX!r}; it was not "
                            "saved by peft, so it is not a colpali_engine adapter")
        name = key.removeprefix(PEFT_PREFIX)
        found = re.fullmatch(r"(.+)\.(lora_A|lora_B)(?:\.default)?\.weight", name)
        if found:
            pairs.setdefault(found[1], {})[found[2]] = tensor
            continue
        module = name.rsplit(".", 1)[0]
        if not any(module == m or module.endswith(f".{m}") for m in lora.modules_to_save) or name not in base:
            raise UserError(f"convert: the adapter's weight {key!r} is neither a LoRA pair nor a module_to_save of "
                            "the base; the adapter and the base do not belong together")
        merged[name] = tensor.to(base[name].dtype)
    for module, pair in sorted(pairs.items()):
        weight = f"{module}.weight"
        if set(pair) != {"lora_A", "lora_B"} or weight not in base:
            raise UserError(f"convert: the adapter's LoRA weights for {module!r} have no matching weight in the base "
                            "(or half a pair); give the base the adapter was trained on (its adapter_config.json "
                            f"names {lora.base!r})")
        if not lora.targets(module):
            raise UserError(f"convert: the adapter holds LoRA weights for {module!r}, which its target_modules do not "
                            "name; the adapter_config.json does not describe this adapter")
        a, b, w = pair["lora_A"].float(), pair["lora_B"].float(), base[weight]
        if (b.shape[0], a.shape[1]) != tuple(w.shape):
            raise UserError(f"convert: LoRA shapes for {module!r} ({tuple(b.shape)} @ {tuple(a.shape)}) do not fit the "
                            f"base's {tuple(w.shape)}; give the base the adapter was trained on ({lora.base!r})")
        merged[weight] = (w.float() + (b @ a) * lora.scale(module)).to(w.dtype)
    return merged


@dataclass(frozen=True)
class Converted:
    """What `convert` wrote, for the command's report."""

    out: Path
    kind: str
    base: Path
    lora_modules: int
    embedding_dim: int

    def spec(self) -> str:
        return f"{self.kind}={self.out}"


def _processor(family: Family, sources: list[Path]) -> Any:
    """The transformers processor from the first folder that holds the tokenizer (colpali_engine
    saves it with the adapter; the base has it too)."""
    import transformers

    cls = getattr(transformers, family.processor_class)
    problems: list[str] = []
    for folder in sources:
        if not any((folder / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
            continue
        try:
            return cls.from_pretrained(folder, local_files_only=True)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            problems.append(f"{folder}: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}")
    raise UserError(f"convert: no {family.processor_class} could be read from the adapter or the base "
                    f"({'; '.join(problems) or 'neither has a tokenizer'}); download the adapter's processor files too")


def convert(adapter: str, out: Path, *, base: str | None = None, allow_download: bool = False,
            progress: Callable[[str], None] | None = None, download_flag: str = "--download") -> Converted:
    """Merge a colpali_engine LoRA adapter into its base and write a transformers-format folder
    that `--retriever colqwen=OUT` / `colpali=OUT` load."""
    import torch
    import transformers

    say = progress or (lambda _line: None)
    adapter_dir = local_folder(adapter, "adapter", allow_download=allow_download, download_flag=download_flag)
    lora = Lora.read(adapter_dir)
    base_name = base or lora.base
    if not base_name:
        raise UserError(f"convert: {adapter_dir / ADAPTER_CONFIG} names no base model; give it with --base")
    base_dir = local_folder(base_name, "base model", allow_download=allow_download, download_flag=download_flag)
    try:
        base_config = json.loads((base_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise UserError(f"convert: the base model {base_dir} has no readable config.json; give the folder of the "
                        f"base checkpoint ({lora.base or 'named by adapter_config.json'})") from None
    model_type = base_config.get("model_type")
    family = FAMILIES.get(model_type or "")
    if family is None:
        raise UserError(f"convert: unknown architecture: the base {base_dir} is a {model_type!r}; this converter "
                        f"knows {', '.join(sorted(FAMILIES))} (ColQwen2, ColQwen2.5, ColPali)")
    if out.exists() and any(out.iterdir()):
        raise UserError(f"convert: {out} exists and is not empty; give a new folder with --out")

    say(f"merging {adapter_dir.name} into {base_dir.name} ({family.kind})")
    weights = read_tensors(base_dir, "base model")
    adapter_weights = read_tensors(adapter_dir, "adapter")
    lora_modules = len({k.rsplit(".lora_", 1)[0] for k in adapter_weights if ".lora_" in k})
    merged = merge(weights, adapter_weights, lora)
    renamed: dict[str, torch.Tensor] = {}
    for key, tensor in merged.items():
        new = rename(family, key)
        if new is not None:
            renamed[new] = tensor
    if "embedding_proj_layer.weight" not in renamed:
        raise UserError(f"convert: the base {base_dir} has no custom_text_proj; it is not a colpali_engine base "
                        f"(give the one the adapter names: {lora.base!r})")
    dim = int(renamed["embedding_proj_layer.weight"].shape[0])
    vlm = {k: v for k, v in base_config.items() if k not in ("architectures", "auto_map", "_name_or_path")}
    config = getattr(transformers, family.config_class)(vlm_config=vlm, embedding_dim=dim)
    dtype = renamed["embedding_proj_layer.weight"].dtype
    with torch.device("meta"):
        model = getattr(transformers, family.model_class)(config)
    expected = set(model.state_dict())
    missing, extra = sorted(expected - set(renamed)), sorted(set(renamed) - expected)
    if missing or extra:
        raise UserError(f"convert: the merged weights do not fit {family.model_class}: missing {missing[:3]}, "
                        f"unexpected {extra[:3]}; the base is not in a colpali_engine layout this converter knows")
    model.load_state_dict(renamed, strict=True, assign=True)
    model.config.dtype = dtype
    out.mkdir(parents=True, exist_ok=True)
    say(f"writing {out}")
    model.save_pretrained(out)
    _processor(family, [adapter_dir, base_dir]).save_pretrained(out)
    return Converted(out, family.kind, base_dir, lora_modules, dim)


def cache_root() -> Path:
    """Where adapters given straight to --retriever are converted to (once): deskbench's cache."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "deskbench" / "converted"


def converted(kind: str, model: str, adapter_dir: Path, *, allow_download: bool) -> Path:
    """An adapter given to `--retriever KIND=MODEL` (vidore/colpali, vidore/colqwen2.5-v0.2): its
    transformers folder, converted on first use into the cache (keyed by the adapter's bytes, so a
    new revision converts again) with its base from the local cache; one line if the base is missing."""
    from deskbench.console import err
    from deskbench.search.retriever import model_fingerprint

    target = cache_root() / f"{model.strip('/').replace('/', '--')}-{model_fingerprint(adapter_dir)[:12]}"
    if (target / "config.json").is_file():
        return target
    partial = target.with_name(f"{target.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        convert(str(adapter_dir), partial, allow_download=allow_download, download_flag="--retriever-download",
                progress=lambda line: err.print(f"--retriever {kind}={model}: {line}", markup=False))
    except UserError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise UserError(f"--retriever {kind}={model} is a colpali_engine adapter, converted before use: "
                        f"{str(exc).removeprefix('convert: ')}") from None
    try:
        partial.rename(target)
    except OSError:  # another process converted it first
        shutil.rmtree(partial, ignore_errors=True)
    return target
