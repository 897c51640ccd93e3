"""Layout-element density by document category and domain (MADQA Appendix B.2, Eq. 7-8, Figures 2
and 11): how many layout elements of each type a page holds, per group of documents, z-scored per
element type so the heatmap shows which groups are table-, figure- or text-heavy.

    d_{c,e} = sum_{p in P_c} n_{p,e} / |P_c|            (Eq. 7: elements of type e per page of c)
    z_{c,e} = (d_{c,e} - mu_e) / sigma_e                (Eq. 8: mu_e, sigma_e over the groups c)

sigma_e is the population standard deviation over the groups (ddof 0); an element type every group
has at the same density has sigma_e = 0 and z = 0 throughout (the paper's white, "average").

The elements come from a layout detector, a `LayoutCounter` (the hook): the paper runs the
Granite-Docling MLLM; deskbench uses DocLayout-YOLO when the doclayout-yolo package is installed
and its weights are in the local Hugging Face cache (every class its model names, counted on the
rendered page), else the named fallback `PdfObjects`, which counts what pdfium exposes in the PDF
itself (`PDF_ELEMENTS` says what each count is). The fallback's elements are PDF objects, not the
paper's layout classes: a scanned page is one image and no text for it. Which one ran is in the
report (`detector`, and `fallback` with why).

Groups: documents carry no category or domain, questions do: a document takes the majority label
of the questions citing it as evidence (corpus_stats.py's rule, Tables 2 and 6), "(no question)"
for a document no question cites. Pages pdfium cannot open are left out and listed.
"""

from __future__ import annotations

import importlib.util
import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel

from deskbench.errors import UserError
from deskbench.tracks.docqa.analysis.corpus_stats import NONE, UNCITED, _majority
from deskbench.tracks.docqa.tasks import DocQATask

if TYPE_CHECKING:
    import numpy as np

    from deskbench.corpus.corpus import Corpus

Grouping = Literal["category", "domain"]
RULE = ("d = elements of the type per page of the group (Eq. 7); z = (d - mean over groups) / population "
        "standard deviation over groups (Eq. 8), 0 when every group has the same d")
TITLE_RATIO = 1.2  # a "title run" is set at least this many times the page's body font size

# What the fallback counts, by element name (the report's `counts` says it too).
PDF_ELEMENTS: dict[str, str] = {
    "text line": "lines of the PDF's text layer holding a visible character (pdfium's text page, split at its "
                 "line breaks)",
    "title run": f"runs of text set at >= {TITLE_RATIO}x the page's body font size (the size most characters "
                 "have), split at line breaks and size changes: headings and titles",
    "image": "image objects drawn on the page (inside form XObjects too): photos, logos, scans",
    "vector path": "path objects: rules, boxes, table borders, chart marks",
    "shading": "shading objects (gradients)",
    "checkbox": "check box and radio button form fields (widget annotations)",
    "form field": "other form fields (widget annotations: text boxes, lists, signatures, buttons)",
    "link": "link annotations",
}

PageImage = Callable[[int], "np.ndarray"]  # page number (1-based) -> RGB pixels, rendered on demand


class LayoutCounter(Protocol):
    """A layout detector: every page of one PDF as {element type: count}."""

    name: str  # recorded in the report

    def count_document(self, pdf: Path, pages: int, image: PageImage) -> list[dict[str, int]]: ...


class PdfObjects:
    """The fallback: what pdfium finds in the PDF (PDF_ELEMENTS), no model."""

    name = "PDF objects via pdfium (fallback; MADQA B.2: Granite-Docling, deskbench's hook: DocLayout-YOLO)"

    def count_document(self, pdf: Path, pages: int, image: PageImage) -> list[dict[str, int]]:
        import pypdfium2 as pdfium

        doc = pdfium.PdfDocument(pdf)
        try:
            doc.init_forms()  # before any page is loaded: the form fields' types need the form environment
            out = []
            for index in range(len(doc)):
                page = doc[index]
                try:
                    out.append(self._count_page(doc, page))
                finally:
                    page.close()
            return out
        finally:
            doc.close()

    def _count_page(self, doc: Any, page: Any) -> dict[str, int]:
        import pypdfium2.raw as raw

        from deskbench.search.embedded.heaven_vs import title_boxes

        counts = dict.fromkeys(PDF_ELEMENTS, 0)
        text = page.get_textpage()
        try:
            chars = []
            for i in range(text.count_chars()):
                chars.append((text.get_text_range(i, 1), round(float(raw.FPDFText_GetFontSize(text, i)), 1),
                              text.get_charbox(i)))
        finally:
            text.close()
        counts["text line"] = sum(1 for line in "".join(c for c, _, _ in chars).splitlines() if line.strip())
        width, height = page.get_size()
        counts["title run"] = len(title_boxes(chars, width, height, TITLE_RATIO))
        kinds = {raw.FPDF_PAGEOBJ_IMAGE: "image", raw.FPDF_PAGEOBJ_PATH: "vector path",
                 raw.FPDF_PAGEOBJ_SHADING: "shading"}
        for obj in page.get_objects():
            if obj.type in kinds:
                counts[kinds[obj.type]] += 1
        form = doc.formenv.raw if doc.formenv is not None else None
        for i in range(raw.FPDFPage_GetAnnotCount(page.raw)):
            annot = raw.FPDFPage_GetAnnot(page.raw, i)
            try:
                subtype = raw.FPDFAnnot_GetSubtype(annot)
                if subtype == raw.FPDF_ANNOT_LINK:
                    counts["link"] += 1
                elif subtype == raw.FPDF_ANNOT_WIDGET:
                    field = raw.FPDFAnnot_GetFormFieldType(form, annot) if form is not None else -1
                    checkable = (raw.FPDF_FORMFIELD_CHECKBOX, raw.FPDF_FORMFIELD_RADIOBUTTON)
                    counts["checkbox" if field in checkable else "form field"] += 1
            finally:
                raw.FPDFPage_CloseAnnot(annot)
        return counts


class DocLayoutYoloCounter:
    """DocLayout-YOLO on each rendered page: every detection counted under its model's class name
    (conf 0.2, imgsz 1024, as MADQA's HEAVEN baseline runs it)."""

    def __init__(self, weights: Path) -> None:
        import torch
        from doclayout_yolo import YOLOv10

        self.model = YOLOv10(str(weights))
        self.device = "cuda:0" if torch.cuda.is_available() else "cpu"
        self.name = f"DocLayout-YOLO ({weights.name}, conf 0.2, imgsz 1024)"

    def count_document(self, pdf: Path, pages: int, image: PageImage) -> list[dict[str, int]]:
        import numpy as np

        out = []
        for page in range(1, pages + 1):
            bgr = np.ascontiguousarray(image(page)[..., ::-1])
            found = self.model.predict(bgr, imgsz=1024, conf=0.2, device=self.device, verbose=False)[0]
            counts: dict[str, int] = defaultdict(int)
            for cls in found.boxes.cls:
                counts[str(found.names[int(cls)])] += 1
            out.append(dict(counts))
        return out


def layout_counter(allow_download: bool = False) -> tuple[LayoutCounter, str | None]:
    """DocLayout-YOLO when installed with local weights, else the fallback with why (one line)."""
    from deskbench.search.embedded.heaven_vs import DLA_FILE, DLA_REPO, doclayout_weights

    weights = doclayout_weights(allow_download)
    if weights is not None:
        return DocLayoutYoloCounter(weights), None
    missing = ("the doclayout-yolo package is not installed" if importlib.util.find_spec("doclayout_yolo") is None
               else f"its weights are not in the local Hugging Face cache (huggingface-cli download {DLA_REPO} {DLA_FILE})")
    return PdfObjects(), f"DocLayout-YOLO is not used: {missing}"


# -- the tables ------------------------------------------------------------------------------


class LayoutGroup(BaseModel):
    """One row of the heatmap: a category (or domain)."""

    name: str
    docs: int
    pages: int
    density: dict[str, float]  # d_{c,e}: elements per page (Eq. 7)
    z: dict[str, float]  # z_{c,e} (Eq. 8)


class LayoutTable(BaseModel):
    grouping: Grouping
    elements: list[str]
    mean: dict[str, float]  # mu_e: the mean of d over the groups (the element labels show it)
    sd: dict[str, float]  # sigma_e: population standard deviation of d over the groups
    groups: list[LayoutGroup]  # by pages, largest first; "(no question)" last


class LayoutDensity(BaseModel):
    """`deskbench analyse layout`'s report."""

    detector: str
    fallback: str | None = None  # why the named fallback ran instead of DocLayout-YOLO
    counts: dict[str, str] = {}  # what each element type is, when the detector says
    documents: int
    pages: int
    unread: list[str] = []  # documents pdfium could not open: in no row
    rule: str = RULE
    by_category: LayoutTable  # MADQA Figure 11
    by_domain: LayoutTable  # MADQA Figure 2


def document_groups(tasks: Sequence[DocQATask], grouping: Grouping) -> dict[str, str]:
    """Each cited document's category (or domain): the majority of its citing questions' labels."""
    labels: dict[str, list[str]] = defaultdict(list)
    for t in tasks:
        value = t.document_category if grouping == "category" else t.domain
        for doc in dict.fromkeys(e.document for e in t.evidence):
            labels[doc].append(value or NONE)
    return {doc: _majority(values) for doc, values in labels.items()}


def density_table(pages: Mapping[str, Sequence[Mapping[str, int]]], groups: Mapping[str, str],
                  grouping: Grouping) -> LayoutTable:
    """Eq. 7 and 8 from each document's per-page counts and each document's group (absent: uncited)."""
    members: dict[str, list[str]] = defaultdict(list)
    for doc in pages:
        members[groups.get(doc, UNCITED)].append(doc)
    elements = sorted({e for counts in pages.values() for page in counts for e in page})
    rows = []
    for name, docs in members.items():
        all_pages = [page for doc in docs for page in pages[doc]]
        n = len(all_pages)
        density = {e: (sum(p.get(e, 0) for p in all_pages) / n if n else 0.0) for e in elements}
        rows.append((name, len(docs), n, density))
    rows.sort(key=lambda r: (r[0] == UNCITED, -r[2], r[0]))
    mean = {e: statistics.fmean(r[3][e] for r in rows) if rows else 0.0 for e in elements}
    sd = {e: statistics.pstdev(r[3][e] for r in rows) if rows else 0.0 for e in elements}
    return LayoutTable(grouping=grouping, elements=elements, mean=mean, sd=sd, groups=[
        LayoutGroup(name=name, docs=docs, pages=n, density=density,
                    z={e: (density[e] - mean[e]) / sd[e] if sd[e] > 0 else 0.0 for e in elements})
        for name, docs, n, density in rows])


def count_corpus(corpus: Corpus, counter: LayoutCounter) -> tuple[dict[str, list[dict[str, int]]], list[str]]:
    """Every document's per-page counts, and the documents that could not be read."""
    import io

    import numpy as np
    from PIL import Image

    from deskbench.corpus.images import ImageSpec

    out: dict[str, list[dict[str, int]]] = {}
    unread: list[str] = []
    for doc in sorted(corpus.documents(), key=lambda d: d.doc_id):
        def image(page: int, doc_id: str = doc.doc_id) -> np.ndarray:
            data = corpus.page_image(doc_id, page, ImageSpec(dpi=144, format="png"))
            return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))

        try:
            out[doc.doc_id] = counter.count_document(corpus.stored_file(doc), doc.page_count, image)
        except UserError:
            raise
        except Exception as exc:  # not a PDF pdfium can open (a text document, a damaged file)
            unread.append(f"{doc.doc_id}: {type(exc).__name__}: {exc}")
    return out, unread


def layout_density(tasks: Sequence[DocQATask], corpus: Corpus, counter: LayoutCounter,
                   fallback: str | None = None) -> LayoutDensity:
    """The density tables by category and by domain over every readable document of the corpus."""
    pages, unread = count_corpus(corpus, counter)
    if not pages:
        raise UserError(f"no document of the corpus at {corpus.root} could be read as a PDF "
                        f"({len(unread)} tried); give a corpus of PDFs")
    return LayoutDensity(
        detector=counter.name, fallback=fallback,
        counts=dict(PDF_ELEMENTS) if isinstance(counter, PdfObjects) else {},
        documents=len(pages), pages=sum(len(p) for p in pages.values()), unread=unread,
        by_category=density_table(pages, document_groups(tasks, "category"), "category"),
        by_domain=density_table(pages, document_groups(tasks, "domain"), "domain"))


def load_layout_density(tasks_path: Path, corpus_dir: Path) -> LayoutDensity:
    from deskbench.corpus.corpus import Corpus
    from deskbench.paths import require_corpus
    from deskbench.tracks.docqa.tasks import read_tasks

    require_corpus(corpus_dir)
    tasks = read_tasks(tasks_path).items
    counter, fallback = layout_counter()
    corpus = Corpus.open(corpus_dir)
    try:
        if not corpus.documents():
            raise UserError(f"the corpus {corpus_dir} holds no documents; ingest some with: "
                            f"deskbench ingest PDFS... --corpus {corpus_dir}")
        return layout_density(tasks, corpus, counter, fallback)
    finally:
        corpus.close()


# -- the heatmap -----------------------------------------------------------------------------


def _heatmap(ax: Any, table: LayoutTable, title: str) -> None:
    import numpy as np
    from matplotlib.colors import LinearSegmentedColormap

    z = np.array([[g.z[e] for e in table.elements] for g in table.groups], dtype=float).reshape(
        len(table.groups), len(table.elements))
    limit = max(float(np.abs(z).max()) if z.size else 0.0, 1.0)
    cmap = LinearSegmentedColormap.from_list("cyan_white_pink", ["#00acc1", "#ffffff", "#e91e63"])
    ax.imshow(z, cmap=cmap, vmin=-limit, vmax=limit, aspect="auto")
    for i, g in enumerate(table.groups):
        for j, e in enumerate(table.elements):
            ax.text(j, i, f"{g.density[e]:.2f}", ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(table.elements)),
                  [f"{e}\n(\u03bc={table.mean[e]:.2f})" for e in table.elements], rotation=30, ha="right", fontsize=7)
    ax.set_yticks(range(len(table.groups)), [g.name for g in table.groups], fontsize=7)
    ax.set_title(title, fontsize=9)


def layout_figure(report: LayoutDensity) -> Any:
    """MADQA Figures 11 (by category) and 2 (by domain): cells are d (elements per page), colour
    the z-score (cyan below the element's mean, white at it, pink above)."""
    from deskbench.analysis.plotting import pyplot

    rows = len(report.by_category.groups) + len(report.by_domain.groups)
    width = max(6.0, 0.9 * max(len(report.by_category.elements), 1) + 3)
    fig, (top, bottom) = pyplot().subplots(2, 1, figsize=(width, 2.5 + 0.35 * rows),
                                           gridspec_kw={"height_ratios": [max(len(report.by_category.groups), 1),
                                                                          max(len(report.by_domain.groups), 1)]})
    _heatmap(top, report.by_category, f"Layout elements per page by category ({report.detector})")
    _heatmap(bottom, report.by_domain, "by domain")
    fig.tight_layout()
    return fig
