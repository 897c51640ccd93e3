"""Visual retrievers, single-vector: a page is its image's embedding (`--retriever dse=MODEL`).

DSE (Ma et al. 2024, "Unifying Multimodal Retrieval via Document Screenshot Embedding";
MrLight/dse-qwen2-2b-mrl-v1) embeds a page screenshot with Qwen2-VL and takes the last token's
last hidden state, normalised; a query is embedded the same way from a text prompt (with the
one-token dummy image the model card gives it). MADQA's HEAVEN baseline (baselines/heaven/,
stage 1) uses exactly this; the defaults below are HEAVEN's:

- pages rendered at 144 dpi, capped at 4,000,000 pixels (heaven/index.py pdf_to_images), longer
  side capped at 2048 px with Lanczos (heaven/encoders.py DSEEncoder.encode_images);
- qwen_vl_utils' fetch_image rounding (sides to multiples of 28, 4*28*28..16384*28*28 pixels),
  then the processor's bounds min_pixels 1*28*28, max_pixels 2560*28*28;
- the model card's prompts (DOC_PROMPT, QUERY_PROMPT); MRL dimension 1536 (the 2B model's full
  width; a smaller `dims` slices before normalising, as MRL requires);
- bfloat16 on CUDA (HEAVEN: "critical for correct embeddings"), float32 on a CPU.

The processing is the tokenizer and the Qwen2-VL image processor, not Qwen2VLProcessor, which
needs torchvision for its video half: the image tokens are expanded here as the processor does.
Models load only from a local folder or the local Hugging Face cache (`allow_download` fetches).
This module also holds what the late-interaction kinds (late_visual.py) share: model folders,
devices, page images.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from deskbench.errors import UserError
from deskbench.search.embedded import store
from deskbench.search.embedded.dense import progress_line
from deskbench.search.retriever import PageSource, Retriever, index_folder, model_fingerprint

if TYPE_CHECKING:
    import torch
    from PIL import Image

    from deskbench.corpus.images import ImageSpec
    from deskbench.search.index import ScoredPage

DOC_PROMPT = ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
              "<|vision_start|><|image_pad|><|vision_end|>What is shown in this image?<|im_end|>\n"
              "<|im_start|>assistant\n<|endoftext|>")
"""MrLight/dse-qwen2-2b-mrl-v1's document prompt: Qwen2-VL's chat template applied to [image,
"What is shown in this image?"] with the generation prompt, then <|endoftext|>."""

QUERY_PROMPT = ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
                "<|vision_start|><|image_pad|><|vision_end|>Query: {query}<|im_end|>\n"
                "<|im_start|>assistant\n<|endoftext|>")
"""Its query prompt: the same template over [a black image (query_image), "Query: {query}"]."""

IMAGE_FACTOR = 28
"""Qwen2-VL's patch (14) times its spatial merge (2): image sides are rounded to multiples of it."""


@dataclass(frozen=True)
class PageRender:
    """How a page becomes the image a visual model sees (HEAVEN's rendering by default)."""

    dpi: int = 144
    max_pixels: int = 4_000_000

    def spec(self) -> ImageSpec:
        from deskbench.corpus.images import ImageSpec

        return ImageSpec(dpi=self.dpi, format="png", max_pixels=self.max_pixels)


def page_images(corpus: PageSource, keys: Sequence[store.Key], render: PageRender) -> list[Image.Image]:
    """The pages' images as RGB PIL images (rendered once, then from the corpus's image cache)."""
    from PIL import Image

    spec = render.spec()
    return [Image.open(io.BytesIO(corpus.page_image(doc, page, spec))).convert("RGB") for doc, page, _ in keys]


# -- model folders -------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelFolder:
    """A model given to `--retriever KIND=MODEL`, found on disk."""

    name: str  # as given: a path or a hub name
    path: Path
    fingerprint: str

    def config(self) -> dict[str, Any]:
        try:
            data = json.loads((self.path / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UserError(f"--retriever model {self.name}: {self.path / 'config.json'} is missing or unreadable "
                            f"({exc}); give the folder of a transformers model (save_pretrained's)") from None
        return data if isinstance(data, dict) else {}


def find_model(kind: str, model: str, *, allow_download: bool) -> ModelFolder:
    """`model` as a local folder, else a hub name in the local Hugging Face cache (downloaded
    only when `allow_download`: dense.model_folder, shared by the embedding kinds), which must be
    a transformers model folder."""
    from deskbench.search.embedded.dense import model_folder

    path = model_folder(kind, model, allow_download=allow_download)
    if (path / "adapter_config.json").is_file() and not (path / "config.json").is_file():  # colpali_engine's
        from deskbench.search.embedded.convert import converted  # layout: merged once, cached

        path = converted(kind, model, path, allow_download=allow_download)
    if not (path / "config.json").is_file():
        raise UserError(f"--retriever {kind}={model}: {path} has no config.json, so it is not a transformers model "
                        "folder; give the folder save_pretrained wrote (or a hub name)")
    return ModelFolder(model, path, model_fingerprint(path))


_EXAMPLE = {"dse": "MrLight/dse-qwen2-2b-mrl-v1", "colqwen": "vidore/colqwen2-v1.0-hf",
            "colpali": "vidore/colpali-v1.3-hf"}


def check_model_type(folder: ModelFolder, kind: str, wanted: Sequence[str]) -> None:
    """Refuse a folder of another architecture (or a colpali_engine adapter) in one line."""
    model_type = folder.config().get("model_type")
    if model_type in wanted:
        return
    hint = ""
    if (folder.path / "adapter_config.json").is_file():
        hint = (" (it is a PEFT adapter, colpali_engine's format; convert it with `deskbench convert`, or use "
                f"a transformers conversion, e.g. {_EXAMPLE[kind]})")
    raise UserError(f"--retriever {kind}={folder.name}: the model is a {model_type!r}, not a "
                    f"{' or '.join(repr(w) for w in wanted)}{hint}; give a {kind} model such as {_EXAMPLE[kind]}")


def device_and_dtype() -> tuple[str, torch.dtype]:
    """CUDA with bfloat16 when there is a GPU (the models' own precision), else the CPU in float32
    (bfloat16 matrix products are slow there)."""
    import torch

    from deskbench.search.embedded.dense import torch_device

    device = torch_device()
    return device, torch.bfloat16 if device == "cuda" else torch.float32


def hits(vectors: store.PageVectors, top: list[tuple[int, float]]) -> list[ScoredPage]:
    from deskbench.search.index import ScoredPage

    return [ScoredPage(vectors.keys[i][0], vectors.keys[i][1], score) for i, score in top]


# -- DSE -----------------------------------------------------------------------------------


def smart_resize(height: int, width: int, min_pixels: int, max_pixels: int,
                 factor: int = IMAGE_FACTOR) -> tuple[int, int]:
    """Qwen2-VL's resize rule (qwen_vl_utils and the image processor agree on it): sides rounded to
    multiples of `factor`, the area scaled into [min_pixels, max_pixels]."""
    if max(height, width) / max(1, min(height, width)) > 200:
        raise ValueError(f"a page image of {width}x{height} is too narrow for Qwen2-VL (aspect ratio over 200)")
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w


@dataclass(frozen=True)
class DseOptions:
    """What changes DSE's page vectors, HEAVEN's values by default (module docstring)."""

    render: PageRender = field(default_factory=PageRender)
    max_side: int = 2048
    fetch_min_pixels: int = 4 * 28 * 28  # qwen_vl_utils' MIN_PIXELS
    fetch_max_pixels: int = 16384 * 28 * 28  # qwen_vl_utils' MAX_PIXELS
    min_pixels: int = 1 * 28 * 28  # the processor's, as HEAVEN loads it
    max_pixels: int = 2560 * 28 * 28
    dims: int | None = 1536  # MRL: None = the model's width
    batch_size: int = 4

    def record(self) -> dict[str, object]:
        return {"dpi": self.render.dpi, "page_max_pixels": self.render.max_pixels, "max_side": self.max_side,
                "fetch_pixels": [self.fetch_min_pixels, self.fetch_max_pixels],
                "pixels": [self.min_pixels, self.max_pixels], "dims": self.dims}


class DseRetriever:
    """Pages and queries embedded by a DSE model; a page's score is the cosine with the query."""

    def __init__(self, corpus: PageSource, folder: ModelFolder, options: DseOptions) -> None:
        import torch
        from transformers import AutoImageProcessor, AutoTokenizer, Qwen2VLForConditionalGeneration

        check_model_type(folder, "dse", ("qwen2_vl",))
        self.folder, self.options = folder, options
        self.device, self.dtype = device_and_dtype()
        self.tokenizer = AutoTokenizer.from_pretrained(folder.path, local_files_only=True)
        self.tokenizer.padding_side = "left"  # the last position is every sequence's own last token
        load_processor: Callable[..., Any] = AutoImageProcessor.from_pretrained  # transformers leaves it unannotated
        self.image_processor = load_processor(
            folder.path, local_files_only=True, min_pixels=options.min_pixels, max_pixels=options.max_pixels)
        model = Qwen2VLForConditionalGeneration.from_pretrained(folder.path, dtype=self.dtype, local_files_only=True)
        from deskbench.search.embedded.dense import refuse_unloaded

        refuse_unloaded(model, f"dse={folder.name}", folder.path)
        self.model = model.model.to(self.device).eval()  # the backbone: its last_hidden_state is normed
        self.image_token_id = int(model.config.image_token_id)
        self.width = int(model.config.get_text_config().hidden_size)
        self._torch = torch
        self.vectors = store.build(
            index_folder(corpus, "dse", folder.fingerprint, options.record()), corpus.page_keys(),
            lambda keys: list(self.embed_images(self.page_image(img) for img in page_images(corpus, keys,
                                                                                                options.render))),
            self.identity(), batch_size=options.batch_size,
            progress=progress_line(f"dse={folder.name}", len(corpus.page_keys())))

    def page_image(self, image: Image.Image) -> Image.Image:
        """HEAVEN's cap on the longer side, then qwen_vl_utils' rounding to multiples of 28."""
        from PIL import Image

        o = self.options
        if max(image.size) > o.max_side:
            ratio = o.max_side / max(image.size)
            image = image.resize((int(image.width * ratio), int(image.height * ratio)), Image.Resampling.LANCZOS)
        h, w = smart_resize(image.height, image.width, o.fetch_min_pixels, o.fetch_max_pixels)
        return image.resize((w, h), Image.Resampling.BICUBIC)

    def _embed(self, prompts: list[str], images: list[Image.Image]) -> store.F32:
        """Last-token embeddings of prompts each holding one image (rows normalised, float32)."""
        torch = self._torch
        pixels = self.image_processor(images=images, return_tensors="pt")
        grid = pixels["image_grid_thw"]
        merge = int(self.image_processor.merge_size) ** 2
        texts = [p.replace("<|image_pad|>", "<|image_pad|>" * (int(g.prod()) // merge)) for p, g in zip(prompts, grid,
                                                                                                       strict=True)]
        tokens = self.tokenizer(texts, padding="longest", return_tensors="pt")
        inputs = {"input_ids": tokens["input_ids"], "attention_mask": tokens["attention_mask"],
                  "mm_token_type_ids": (tokens["input_ids"] == self.image_token_id).long(),
                  "pixel_values": pixels["pixel_values"].to(self.dtype), "image_grid_thw": grid}
        with torch.inference_mode():
            out = self.model(**{k: v.to(self.device) for k, v in inputs.items()})
        reps = out.last_hidden_state[:, -1].float()
        if self.options.dims is not None:
            reps = reps[:, :self.options.dims]  # MRL: slice, then normalise
        return np.asarray(torch.nn.functional.normalize(reps, p=2, dim=-1).cpu().numpy(), dtype=np.float32)

    def embed_images(self, images: Sequence[Image.Image] | Any) -> list[store.F32]:
        """Page images (already sized by page_image) to one (1, dims) row each."""
        images = list(images)
        rows = self._embed([DOC_PROMPT] * len(images), images)
        return [rows[i:i + 1] for i in range(len(images))]

    def query_image(self) -> Image.Image:
        """The model card's dummy image: 28x28 black with resized_height = resized_width = 1, which
        qwen_vl_utils' fetch_image rounds up to its minimum area (4*28*28): 56x56, 4 image tokens."""
        from PIL import Image

        h, w = smart_resize(1, 1, self.options.fetch_min_pixels, self.options.fetch_max_pixels)
        return Image.new("RGB", (IMAGE_FACTOR, IMAGE_FACTOR)).resize((w, h))

    def encode_query(self, query: str) -> store.F32:
        """A query's (dims,) vector: the query prompt around the dummy image."""
        row: store.F32 = self._embed([QUERY_PROMPT.format(query=query)], [self.query_image()])[0]
        return row

    def search(self, query: str, k: int) -> list[ScoredPage]:
        return hits(self.vectors, self.vectors.top_k_dot(self.encode_query(query), k))

    def identity(self) -> dict[str, object]:
        return {"kind": "dse", "model": self.folder.name, "fingerprint": self.folder.fingerprint,
                "dims": min(self.width, self.options.dims or self.width), "pooling": "last token",
                "dtype": str(self.dtype).removeprefix("torch."),
                "prompts": {"document": DOC_PROMPT, "query": QUERY_PROMPT}, "images": self.options.record()}


class DseKind:
    """`dse=MODEL`: DSE page-screenshot embeddings (HEAVEN's stage 1)."""

    name = "dse"
    needs_model = True
    summary = "page images embedded by a DSE model (Qwen2-VL, last token), cosine; e.g. dse=MrLight/dse-qwen2-2b-mrl-v1"

    def __init__(self, options: DseOptions | None = None) -> None:
        self.options = options or DseOptions()

    def open(self, corpus: PageSource, model: str | None, *, allow_download: bool = False) -> Retriever:
        if model is None:
            raise UserError("--retriever dse needs a model: give dse=MODEL, e.g. dse=MrLight/dse-qwen2-2b-mrl-v1")
        return DseRetriever(corpus, find_model("dse", model, allow_download=allow_download), self.options)


DSE = DseKind()
