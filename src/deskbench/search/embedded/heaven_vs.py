"""HEAVEN's VS-pages (visually-summarised pages): title regions of many pages stacked into one image.

As MADQA's official baseline builds them (baselines/heaven/vs_pages.py, index.py, commit 978fa76):

- a layout detector finds the title and section-header regions of every page (DocLayout-YOLO's
  DocStructBench model, classes 7 "Section-header" and 10 "Title", conf 0.2, imgsz 1024);
- the regions of the WHOLE corpus (documents in order, pages in order) are cut out and grouped:
  fewer than 4 regions in all -> one VS-page of every page image (a grid when over 3 pages);
  at most 20 pages -> one VS-page of every region; else chunks of ceil(regions * r / pages)
  regions each (r the reduction factor, 15), so about pages / r VS-pages;
- each chunk's regions are stacked vertically, centred on a white canvas of the widest one;
- every page not covered by a chunk is added to the chunk whose page range holds it, else the
  nearest (Assemble.postprocess_mapping, including its in-place growth of the ranges);
- without DLA (`layout=grid`, the official `--use-dla` off) r consecutive pages form a grid.

DocLayout-YOLO (doclayout-yolo) pulls a CUDA torch and torchvision, so it is optional: used when
installed with its weights local; else the named fallback reads title lines from the PDF's text
layer (runs set in a font clearly larger than the page's body text). The detector used is recorded
in the retriever's identity, so a fallback never passes for the official detector.
"""

from __future__ import annotations

import importlib.util
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from deskbench.errors import UserError

Pixels = npt.NDArray[np.uint8]  # (h, w, 3) RGB
Box = tuple[float, float, float, float]  # x1, y1, x2, y2, normalised to the page (top-left origin)

REGION_MIN = 4  # construct_vs_page's region_min_threshold
CHUNK_THRESHOLD = 20  # Assemble's chunk_threshold: a corpus of at most this many pages gets one VS-page
DLA_REPO = "juliozhao/DocLayout-YOLO-DocStructBench"
DLA_FILE = "doclayout_yolo_docstructbench_imgsz1024.pt"
DLA_TITLE_CLASSES = (7, 10)  # DocStructBench: Section-header, Title


# -- layout detectors ----------------------------------------------------------------------


class LayoutDetector(Protocol):
    """Finds a page's title regions (what VS-pages are made of)."""

    name: str  # recorded in the retriever's identity

    def titles(self, pdf: Path | None, page: int, image: Pixels) -> list[Box]: ...


class DocLayoutYolo:
    """The official detector: DocLayout-YOLO on the page image, title classes kept, in its order."""

    name = "DocLayout-YOLO (DocStructBench, classes Section-header and Title, conf 0.2, imgsz 1024)"

    def __init__(self, weights: Path) -> None:
        import torch
        from doclayout_yolo import YOLOv10

        self.model = YOLOv10(str(weights))
        self.device = "cuda:0" if torch.cuda.is_available() else "cpu"

    def titles(self, pdf: Path | None, page: int, image: Pixels) -> list[Box]:
        bgr = np.ascontiguousarray(image[..., ::-1])  # the official code hands cv2's BGR arrays
        out = self.model.predict(bgr, imgsz=1024, conf=0.2, device=self.device, verbose=False)[0]
        boxes: list[Box] = []
        for cls, box in zip(out.boxes.cls, out.boxes.xyxyn, strict=True):
            if int(cls) in DLA_TITLE_CLASSES:
                x1, y1, x2, y2 = (float(v) for v in box.tolist())
                boxes.append((x1, y1, x2, y2))
        return boxes


def doclayout_weights(allow_download: bool) -> Path | None:
    """DocLayout-YOLO's weights when the package is installed and the weights are local (or may be
    fetched); None otherwise."""
    if importlib.util.find_spec("doclayout_yolo") is None:
        return None
    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(DLA_REPO, DLA_FILE, local_files_only=not allow_download))
    except Exception:  # not in the cache (or no network): the caller names the fallback
        return None


class TextLayerTitles:
    """Fallback detector: lines of the PDF's text layer set in a font at least `ratio` times the
    page's body size (the size most of its characters have), as title regions."""

    name = "text-layer titles (fallback; official: DocLayout-YOLO)"

    def __init__(self, ratio: float = 1.2) -> None:
        self.ratio = ratio

    def titles(self, pdf: Path | None, page: int, image: Pixels) -> list[Box]:
        if pdf is None:
            return []
        import pypdfium2 as pdfium
        import pypdfium2.raw as raw

        doc = pdfium.PdfDocument(pdf)
        try:
            pg = doc[page - 1]
            width, height = pg.get_size()
            text = pg.get_textpage()
            chars: list[tuple[str, float, tuple[float, float, float, float]]] = []
            for i in range(text.count_chars()):
                ch = text.get_text_range(i, 1)
                chars.append((ch, round(float(raw.FPDFText_GetFontSize(text, i)), 1), text.get_charbox(i)))
            text.close()
            pg.close()
        finally:
            doc.close()
        return title_boxes(chars, width, height, self.ratio)


def title_boxes(chars: Sequence[tuple[str, float, tuple[float, float, float, float]]], width: float, height: float,
                ratio: float) -> list[Box]:
    """Runs of characters (split at line breaks and font-size changes) whose size is at least
    `ratio` times the body size, as normalised boxes; PDF boxes are (left, bottom, right, top)."""
    sizes = [size for ch, size, _ in chars if ch.strip()]
    if not sizes:
        return []
    body = statistics.mode(sizes)
    runs: list[list[tuple[str, float, tuple[float, float, float, float]]]] = [[]]
    for c in chars:
        ch, size, _ = c
        if ch in "\r\n" or (runs[-1] and runs[-1][-1][1] != size):
            runs.append([])
        if ch not in "\r\n":
            runs[-1].append(c)
    boxes: list[Box] = []
    for run in runs:
        visible = [c for c in run if c[0].strip()]
        if sum(c[0].isalnum() for c in visible) < 2 or visible[0][1] < ratio * body:
            continue
        left = min(c[2][0] for c in visible)
        bottom = min(c[2][1] for c in visible)
        right = max(c[2][2] for c in visible)
        top = max(c[2][3] for c in visible)
        boxes.append((max(0.0, left / width), max(0.0, (height - top) / height),
                      min(1.0, right / width), min(1.0, (height - bottom) / height)))
    return boxes


LAYOUTS = ("auto", "doclayout-yolo", "text-layer", "grid")


def layout_detector(choice: str, *, allow_download: bool) -> LayoutDetector | None:
    """The detector `layout=` chose (None for `grid`, the official no-DLA VS-pages); `auto` is
    DocLayout-YOLO when it is installed with local weights, else the text-layer fallback."""
    if choice == "grid":
        return None
    if choice in ("auto", "doclayout-yolo"):
        weights = doclayout_weights(allow_download)
        if weights is not None:
            return DocLayoutYolo(weights)
        if choice == "doclayout-yolo":
            raise UserError("--retriever heaven=...,layout=doclayout-yolo: DocLayout-YOLO is not available (the "
                            "doclayout-yolo package, or its weights in the local Hugging Face cache); install it and "
                            f"run `huggingface-cli download {DLA_REPO} {DLA_FILE}`, or give layout=text-layer or "
                            "layout=grid")
    if choice in ("auto", "text-layer"):
        return TextLayerTitles()
    raise UserError(f"--retriever heaven=...,layout={choice}: not a layout; choose one of {', '.join(LAYOUTS)}")


# -- grouping (Assemble.construct_vs_page and postprocess_mapping) ----------------------------


@dataclass(frozen=True)
class Plan:
    """Which VS-pages to make: each one's regions (indices into the region list), or, for
    `whole_pages`, one image of every page; and the pages each VS-page stands for."""

    whole_pages: bool
    chunks: list[list[int]]
    pages: list[list[int]]


def plan(region_pages: Sequence[int], num_pages: int, reduction_factor: int) -> Plan:
    """construct_vs_page's three cases over the corpus's regions (each region's page index), then
    postprocess_mapping's filling-in of the pages no chunk covers."""
    n = len(region_pages)
    if n < REGION_MIN:
        return Plan(True, [], [list(range(num_pages))])
    if num_pages <= CHUNK_THRESHOLD:
        chunks = [list(range(n))]
    else:
        per = math.ceil(n * (reduction_factor / num_pages))
        chunks = [list(range(s, min(s + per, n))) for s in range(0, n, per)]
    mapping = {i: sorted(set(region_pages[j] for j in chunk)) for i, chunk in enumerate(chunks)}
    return Plan(False, chunks, _fill(mapping, num_pages))


def _fill(mapping: dict[int, list[int]], num_pages: int) -> list[list[int]]:
    """postprocess_mapping, step for step: each uncovered page, in order, joins the first chunk
    whose (growing) range holds it, else the nearest one (the first of equals)."""
    assigned = {p for pages in mapping.values() for p in pages}
    for page in sorted(set(range(num_pages)) - assigned):
        best, best_distance = 0, math.inf
        for idx, pages in mapping.items():
            if not pages:
                continue
            low, high = min(pages), max(pages)
            if low <= page <= high:
                best = idx
                break
            distance = min(abs(page - low), abs(page - high))
            if distance < best_distance:
                best, best_distance = idx, distance
        mapping[best].append(page)
    return [sorted(set(mapping[i])) for i in sorted(mapping)]


def grid_plan(num_pages: int, reduction_factor: int) -> Plan:
    """The official VS-pages without DLA: `reduction_factor` consecutive pages per grid image."""
    groups = [list(range(s, min(s + reduction_factor, num_pages))) for s in range(0, num_pages, reduction_factor)]
    return Plan(True, [], groups or [[]])


# -- images (vs_pages.py's utils and Assemble.gen_vs_page) --------------------------------------


def _resize(image: Pixels, width: int, height: int, area: bool) -> Pixels:
    """cv2.resize as the official code calls it (INTER_AREA in grids, the default bilinear when
    concatenating), or PIL's box / bilinear filter when OpenCV is not installed."""
    if importlib.util.find_spec("cv2") is not None:
        import cv2

        return np.asarray(cv2.resize(image, (width, height), interpolation=cv2.INTER_AREA if area else cv2.INTER_LINEAR))
    from PIL import Image

    # PIL's BOX averages the covered source pixels, as INTER_AREA does when shrinking
    flt = Image.Resampling.BOX if area else Image.Resampling.BILINEAR
    return np.asarray(Image.fromarray(image).resize((width, height), flt))


def resizer() -> str:
    return "cv2" if importlib.util.find_spec("cv2") is not None else "PIL (fallback; official: cv2)"


def crop(image: Pixels, box: Box) -> Pixels | None:
    """get_title_regions' cut: pixel box by int(), empty boxes dropped, tall thin regions turned."""
    height, width = image.shape[:2]
    x1, y1, x2, y2 = int(box[0] * width), int(box[1] * height), int(box[2] * width), int(box[3] * height)
    if x2 <= x1 or y2 <= y1:
        return None
    region = image[y1:y2, x1:x2]
    if region.shape[0] > region.shape[1] * 5:
        region = np.rot90(region, k=-1)
    return np.ascontiguousarray(region) if region.size > 0 else None


def stack(regions: Sequence[Pixels]) -> Pixels:
    """gen_vs_page: regions stacked vertically, each centred on white at the widest one's width."""
    if not regions:
        return np.full((100, 100, 3), 255, np.uint8)
    widest = max(r.shape[1] for r in regions)
    rows = []
    for r in regions:
        row = np.full((r.shape[0], widest, 3), 255, np.uint8)
        x = (widest - r.shape[1]) // 2
        row[:, x:x + r.shape[1]] = r
        rows.append(row)
    return np.vstack(rows)


def grid(images: Sequence[Pixels], padding: int = 5) -> Pixels:
    """grid_concat: the images on a near-square grid of equal cells (area-resized, centred)."""
    if not images:
        return np.full((100, 100, 3), 255, np.uint8)
    n = len(images)
    size = int(math.ceil(math.sqrt(n)))
    rows, cols = (size - 1 if size * (size - 1) >= n else size), size
    avg_aspect = sum(i.shape[1] / max(i.shape[0], 1) for i in images) / n
    avg_area = sum(i.shape[0] * i.shape[1] for i in images) / n
    cell_h = int(math.sqrt(avg_area / max(avg_aspect, 0.1)))
    cell_w = int(avg_aspect * cell_h)
    cell_h, cell_w = max(cell_h, 50), max(cell_w, 50)
    canvas = np.full((rows * cell_h + (rows - 1) * padding, cols * cell_w + (cols - 1) * padding, 3), 255, np.uint8)
    for idx, img in enumerate(images):
        h, w = img.shape[:2]
        aspect = w / max(h, 1)
        if aspect > avg_aspect:
            new_w, new_h = cell_w, max(int(cell_w / max(aspect, 0.1)), 1)
        else:
            new_h, new_w = cell_h, max(int(cell_h * aspect), 1)
        small = _resize(img, new_w, new_h, area=True)
        y = (idx // cols) * (cell_h + padding) + (cell_h - new_h) // 2
        x = (idx % cols) * (cell_w + padding) + (cell_w - new_w) // 2
        canvas[y:y + new_h, x:x + new_w] = small
    return canvas


def concat(images: Sequence[Pixels]) -> Pixels:
    """naive_concat: side by side at the lowest height, or (wider than tall in all) stacked at the
    narrowest width."""
    if not images:
        return np.full((100, 100, 3), 255, np.uint8)
    widths = [i.shape[1] for i in images]
    heights = [i.shape[0] for i in images]
    if sum(widths) > sum(heights):
        w = min(widths)
        return np.vstack([_resize(i, w, int(i.shape[0] * w / max(i.shape[1], 1)), area=False) for i in images])
    h = min(heights)
    return np.hstack([_resize(i, int(i.shape[1] * h / max(i.shape[0], 1)), h, area=False) for i in images])


def whole_pages_image(pages: Sequence[Pixels]) -> Pixels:
    """construct_vs_page's case of too few regions: all the pages, a grid when over 3."""
    return grid(pages) if len(pages) > 3 else concat(pages)


@dataclass(frozen=True)
class Region:
    """A title region found on a page (its index in the corpus's pages), cut when a VS-page is made."""

    page: int
    box: Box


def vs_page_image(plan_: Plan, v: int, regions: Sequence[Region], page_image: Callable[[int], Pixels], *,
                  grid_only: bool = False) -> Pixels:
    """VS-page `v` of a plan: its regions cut and stacked (one page image held at a time), or its
    pages as one image (a grid per group for grid plans, as without DLA)."""
    if not plan_.whole_pages:
        held: tuple[int, Pixels] | None = None
        cuts: list[Pixels] = []
        for j in plan_.chunks[v]:
            region = regions[j]
            if held is None or held[0] != region.page:
                held = (region.page, page_image(region.page))
            cut = crop(held[1], region.box)
            if cut is not None:
                cuts.append(cut)
        return stack(cuts)
    pages = [page_image(p) for p in plan_.pages[v]]
    return grid(pages) if grid_only else whole_pages_image(pages)


def describe(detector: LayoutDetector | None) -> dict[str, Any]:
    """What the VS-pages were made with, for the retriever's identity."""
    return {"dla": detector.name if detector is not None else "none (grid of consecutive pages, the official "
            "no-DLA VS-pages)", "resize": resizer()}
