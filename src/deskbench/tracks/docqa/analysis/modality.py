"""Which visual modality a question needs (MADQA E.3, Prompt 3, Table 10, Figure 4), and each
system's accuracy by it.

As the paper does, a model classifies each *question* (one call per question, not per page): it is
shown Prompt 3 with the question and its gold answer, then the rendered images of all the gold
evidence pages, and replies with Prompt 3's JSON (primary_category, all_categories, confidence,
reasoning). The paper used Gemini 3 Flash; any deskbench chat model that takes images can be given.

Prompt 3 has eight labels; Table 10 reports five categories. The mapping (the paper gives it only
through Table 10's names and its artifact sub-rows): FREE_TEXT -> Free Text, TABLE_STRUCTURE ->
Tabular, STRUCTURED_DATA_EXTRACTION -> Structured, SPATIAL_LAYOUT -> Other Spatial, and the visual
artifacts CHART_DIAGRAM (charts/diagrams), OTHER_VISUAL (handwriting/signatures, checkboxes,
stamps), IMAGE_PHOTO (images/photos) and TEXT_FORMATTING (not a sub-row of Table 10; counted here
under Artifacts as "text formatting") -> Artifacts. "Requires Visual/Structure" is every question
whose primary category is not Free Text; a question "benefits from multiple modalities" when its
labels span two or more Table 10 categories.

The labels are kept in the run (its meta table, per classifier model), each with the hash of what
the model was shown, so a second analysis asks only for questions that are new or changed. A
reply that is not Prompt 3's JSON leaves the question unclassified (listed with why), never guessed.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from deskbench.errors import UserError
from deskbench.models.types import (
    ChatModel,
    ChatRequest,
    ImagePart,
    Message,
    ModelError,
    Part,
    TextPart,
)
from deskbench.runs.store import RunStore
from deskbench.tracks.docqa.analysis.judged import AnalysisScoring, Judging
from deskbench.tracks.docqa.tasks import DocQATask, ItemScore

if TYPE_CHECKING:
    from deskbench.tracks.docqa.scoring.docqa import ScoreOptions
    from deskbench.tracks.docqa.scoring.docqa_summary import GroupSummary

LABELS = ("FREE_TEXT", "TABLE_STRUCTURE", "CHART_DIAGRAM", "TEXT_FORMATTING", "IMAGE_PHOTO", "SPATIAL_LAYOUT",
          "STRUCTURED_DATA_EXTRACTION", "OTHER_VISUAL")
CATEGORIES = ("Free Text", "Structured", "Tabular", "Artifacts", "Other Spatial")  # Table 10's order
CATEGORY = {"FREE_TEXT": "Free Text", "TABLE_STRUCTURE": "Tabular", "STRUCTURED_DATA_EXTRACTION": "Structured",
            "SPATIAL_LAYOUT": "Other Spatial", "CHART_DIAGRAM": "Artifacts", "OTHER_VISUAL": "Artifacts",
            "IMAGE_PHOTO": "Artifacts", "TEXT_FORMATTING": "Artifacts"}
ARTIFACT_KIND = {"CHART_DIAGRAM": "charts/diagrams", "OTHER_VISUAL": "handwriting/signatures",
                 "IMAGE_PHOTO": "images/photos", "TEXT_FORMATTING": "text formatting"}
META_KEY = "analysis.modality"  # the run's meta: {classifier model: {task id: label}}
DPI = 150

# Prompt 3 as the paper prints it (Appendix E.3). Item 6's last line is cut off in the paper
# ("STRUCTURED_DATA . . ."); it is completed with the label's full name.
PROMPT_3 = """You are an expert at analyzing document VQA (Visual Question Answering) questions to determine whether visual modality is required or beneficial for answering them.

## Category Definitions
Classify the question into one or more categories based on these precise definitions:

1. **FREE_TEXT** – Answer is present in free-flowing text.
 - Answer is extracted directly from running/narrative text.
 - No reference to tables, charts, forms, or visual elements.
 - No need to understand document layout or spatial relationships.
 - Linear reading comprehension; clean OCR text would be sufficient.
2. **TABLE_STRUCTURE** – Requires understanding TABLE relationships (rows/columns).
 - Answer requires correlating rows and columns in a TABLE.
 - Need to understand which values belong to which headers.
 - Requires comparing multiple rows (finding max/min, aggregating data).
 - **NOT for forms:** Forms go to STRUCTURED_DATA_EXTRACTION.
3. **CHART_DIAGRAM** – Requires visual chart/diagram interpretation.
 - Data encoded visually: bar heights, line trends, pie slices, diagrams.
 - Requires counting visual elements or extracting values from visual scales.
 - Visual relationships not captured in text.
4. **TEXT_FORMATTING** – Requires seeing text formatting ONLY.
 - Identifying bold, italic, underlined, colored, or highlighted text.
 - Font size or style differences (headings vs body).
 - **NOT for:** handwriting, signatures, checkboxes → use OTHER_VISUAL.
5. **IMAGE_PHOTO** – Requires actual image/photo content.
 - Asks about photo descriptions, captions, or content visible in photos.
 - References specific images/figures containing visual information.
6. **SPATIAL_LAYOUT** – Requires spatial/layout understanding NOT covered by others.
 - **ONLY use if:** Location matters (top/bottom, left/right, margins, header/footer).
 - **Special cases only:** “at the bottom of page”, “in the sidebar”.
 - **NOT for tables/forms:** Use TABLE_STRUCTURE or STRUCTURED_DATA_EXTRACTION.
7. **STRUCTURED_DATA_EXTRACTION** – Extraction from structured FORMS.
 - Source is a structured FORM (permit, license, application, financial form).
 - Visual structure helps navigate the form and find the right field.
 - Answer is typically a specific value from ONE form field (label:value pairs).
 - **NOT for tables:** If comparing rows/columns, use TABLE_STRUCTURE.
8. **OTHER_VISUAL** – Visual artifacts not covered above.
 - Handwritten text, signatures, checkboxes/tick marks.
 - Stamps, seals, logos, mathematical notation, special symbols.

## Input
Question: {question}

Answer: {answer}

**The gold evidence page images are provided below.** Examine them to determine whether visual modality is needed to answer the question.

## Guidance & Priority
Multi-label Guidance:

- **Most questions should have ONLY ONE category** (the primary visual requirement).
- Only assign multiple categories if the question **TRULY** requires combining different modalities.
- **Table vs Form:** TABLE_STRUCTURE + STRUCTURED_DATA is extremely rare (requires both correlating rows AND extracting form fields).
- **Spatial:** Only use if position matters AND it is not covered by table/form structure.

Selection Priority:

1. If it's a table with rows/columns to correlate → **TABLE_STRUCTURE**.
2. If it's a form with label:value pairs → **STRUCTURED_DATA_EXTRACTION**.
3. If spatial position matters beyond structure → add **SPATIAL_LAYOUT** (rare).

## Instructions
- Judge based on whether visual modality would actually help answer the question.
- Choose the **ONE** primary visual requirement in most cases.
- Do not rely on keyword presence - analyze the actual task.
- Consider whether clean OCR text would be sufficient.

## Output Schema
Respond with a JSON object:

```
{{
  "primary_category": "the single most important category",
  "all_categories": ["list", "of", "ALL", "applicable", "categories"],
  "confidence": 0.0-1.0,
  "reasoning": "brief explanation covering all assigned categories"
}}
```"""

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "primary_category": {"type": "string", "enum": list(LABELS)},
        "all_categories": {"type": "array", "items": {"type": "string", "enum": list(LABELS)}},
        "confidence": {"type": "number"},
        "reasoning": {"type": "string"},
    },
    "required": ["primary_category", "all_categories", "confidence", "reasoning"],
    "additionalProperties": False,
}
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


class ModalityLabel(BaseModel):
    primary: str  # one of LABELS
    labels: list[str]  # all_categories, the primary first
    confidence: float | None = None
    reasoning: str = ""
    inputs: str  # sha256 of what the model was shown: a changed question, answer or page is asked again

    @property
    def category(self) -> str:
        return CATEGORY[self.primary]

    @property
    def categories(self) -> list[str]:
        return list(dict.fromkeys(CATEGORY[x] for x in self.labels))


class CategoryCount(BaseModel):
    category: str
    count: int
    share: float | None  # of the classified questions


class CategoryAccuracy(BaseModel):
    category: str
    n: int  # questions of this category the system has an accuracy on
    accuracy: float | None


class SystemModality(BaseModel):
    system: str
    n: int
    accuracy: float | None
    by_category: list[CategoryAccuracy]  # by primary category, Table 10's order


class ModalityReport(BaseModel):
    run: str
    classifier: str  # the model that classified (the paper: Gemini 3 Flash)
    prompt_sha256: str  # of Prompt 3's template as sent
    dpi: int  # of the rendered evidence pages
    labels: dict[str, ModalityLabel]  # task id -> label
    reused: int  # labels read back from the run
    asked: int  # questions the model was asked now
    unclassified: dict[str, str]  # task id -> why it has no label (in no row below)
    distribution: list[CategoryCount]  # Table 10, by primary category
    artifacts: dict[str, int]  # Table 10's sub-rows: primary artifact label kinds
    requires_visual: CategoryCount  # primary category not Free Text
    multiple: CategoryCount  # labels over two or more categories
    combinations: dict[str, int]  # "Structured + Artifacts" -> questions whose labels span both (Figure 4)
    systems: list[SystemModality]
    scoring: AnalysisScoring | None = None


def prompt_of(task: DocQATask) -> str:
    """Prompt 3 with the question and its gold answer (variants joined as Prompt 2's are)."""
    answer = " | ".join(", ".join(v) for v in task.answer_variants)
    return PROMPT_3.format(question=task.question, answer=answer)


def evidence_pages(task: DocQATask) -> list[tuple[str, int]]:
    return list(dict.fromkeys((e.document, e.page) for e in task.evidence))


def inputs_hash(prompt: str, images: Sequence[bytes]) -> str:
    h = hashlib.sha256(prompt.encode())
    for image in images:
        h.update(hashlib.sha256(image).digest())
    return h.hexdigest()


def parse_label(text: str, inputs: str) -> ModalityLabel:
    """Prompt 3's JSON reply (a ```json fence allowed); ValueError naming what is wrong."""
    try:
        data = json.loads(_FENCE.sub("", text.strip()))
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    primary = data.get("primary_category")
    labels = data.get("all_categories") or []
    if primary not in LABELS:
        raise ValueError(f"primary_category {primary!r} is not one of Prompt 3's categories")
    if not isinstance(labels, list) or any(x not in LABELS for x in labels):
        raise ValueError(f"all_categories {labels!r} holds a label that is not one of Prompt 3's categories")
    confidence = data.get("confidence")
    return ModalityLabel(primary=primary, labels=list(dict.fromkeys([primary, *labels])),
                         confidence=float(confidence) if isinstance(confidence, int | float) else None,
                         reasoning=str(data.get("reasoning") or ""), inputs=inputs)


async def classify_one(model: ChatModel, prompt: str, images: Sequence[bytes]) -> ModalityLabel:
    """One question's label; ValueError (why) when the model gives none."""
    parts: list[Part] = [TextPart(text=prompt), *(ImagePart.of(image, "image/png") for image in images)]
    request = ChatRequest(messages=[Message(role="user", content=parts)], response_schema=OUTPUT_SCHEMA)
    try:
        response = await model.complete(request)
    except ModelError as exc:
        raise ValueError(f"the model call failed: {exc}") from None
    return parse_label(response.message.text(), inputs_hash(prompt, images))


def render(corpus: Any, task: DocQATask, dpi: int) -> list[bytes]:
    """The gold evidence pages as PNG; UserError when one is not in the corpus."""
    from deskbench.corpus.images import ImageSpec

    return [corpus.page_image(doc, page, ImageSpec(dpi=dpi, format="png")) for doc, page in evidence_pages(task)]


async def classify_all(model: ChatModel, corpus: Any, tasks: Sequence[DocQATask], dpi: int,
                       known: Mapping[str, ModalityLabel]) -> tuple[dict[str, ModalityLabel], dict[str, str], int]:
    """Labels for every task (a known label kept when the model would be shown the same now),
    the tasks left without one and why, and how many were asked."""
    labels: dict[str, ModalityLabel] = {}
    failed: dict[str, str] = {}
    todo: list[tuple[DocQATask, str, list[bytes]]] = []
    for task in tasks:
        if not task.evidence:
            failed[task.id] = "no gold evidence page to show"
            continue
        try:
            images = await asyncio.to_thread(render, corpus, task, dpi)
        except UserError as exc:
            failed[task.id] = f"evidence page not rendered: {exc}"
            continue
        prompt = prompt_of(task)
        old = known.get(task.id)
        if old is not None and old.inputs == inputs_hash(prompt, images):
            labels[task.id] = old
        else:
            todo.append((task, prompt, images))
    try:
        found = await asyncio.gather(*(classify_one(model, p, im) for _, p, im in todo), return_exceptions=True)
    finally:
        await model.aclose()
    for (task, _, _), result in zip(todo, found, strict=True):
        if isinstance(result, ModalityLabel):
            labels[task.id] = result
        elif isinstance(result, ValueError):
            failed[task.id] = str(result)
        else:
            raise result
    return labels, failed, len(todo)


def _count(category: str, n: int, total: int) -> CategoryCount:
    return CategoryCount(category=category, count=n, share=n / total if total else None)


def modality_report(run: str, classifier: str, dpi: int, labels: Mapping[str, ModalityLabel],
                    unclassified: Mapping[str, str], accuracy_by_system: Mapping[str, Mapping[str, float | None]],
                    reused: int = 0, asked: int = 0) -> ModalityReport:
    """Table 10's distribution, Figure 4's combinations and each system's accuracy by primary category."""
    total = len(labels)
    primary = Counter(label.category for label in labels.values())
    artifacts = Counter(ARTIFACT_KIND[x.primary] for x in labels.values() if x.primary in ARTIFACT_KIND)
    spans = [x.categories for x in labels.values()]
    combos: Counter[str] = Counter()
    for cats in spans:
        ordered = [c for c in CATEGORIES if c in cats]
        for i, a in enumerate(ordered):
            for b in ordered[i + 1:]:
                combos[f"{a} + {b}"] += 1
    systems = []
    for system, acc in accuracy_by_system.items():
        rows = []
        for category in CATEGORIES:
            scores = [s for tid, x in labels.items() if x.category == category and (s := acc.get(tid)) is not None]
            rows.append(CategoryAccuracy(category=category, n=len(scores),
                                         accuracy=sum(scores) / len(scores) if scores else None))
        every = [s for tid in labels if (s := acc.get(tid)) is not None]
        systems.append(SystemModality(system=system, n=len(every), accuracy=sum(every) / len(every) if every else None,
                                      by_category=rows))
    return ModalityReport(
        run=run, classifier=classifier, prompt_sha256=hashlib.sha256(PROMPT_3.encode()).hexdigest(), dpi=dpi,
        labels=dict(labels), reused=reused, asked=asked, unclassified=dict(unclassified),
        distribution=[_count(c, primary[c], total) for c in CATEGORIES],
        artifacts={k: artifacts[k] for k in ARTIFACT_KIND.values()},
        requires_visual=_count("Requires Visual/Structure", total - primary["Free Text"], total),
        multiple=_count("Multiple categories", sum(len(c) > 1 for c in spans), total),
        combinations=dict(sorted(combos.items(), key=lambda kv: (-kv[1], kv[0]))),
        systems=systems,
    )


def _stored(store: RunStore, classifier: str) -> dict[str, ModalityLabel]:
    kept = store.meta(META_KEY)
    mine = kept.get(classifier) if isinstance(kept, dict) else None
    if not isinstance(mine, dict):
        return {}
    out = {}
    for tid, value in mine.items():
        try:
            out[tid] = ModalityLabel.model_validate(value)
        except ValueError:
            continue  # an older shape: asked again
    return out


def load_modality(run_dir: Path, corpus_dir: Path, model: ChatModel, dpi: int = DPI,
                  judging: Judging | None = None) -> ModalityReport:
    """Classify the run's questions with `model` (labels kept in the run and reused), then each
    system's accuracy by category, scored by ANLS* or `judging`'s judge."""
    from deskbench.corpus import Corpus
    from deskbench.tracks.docqa.analysis.drift import run_accuracies

    judging = judging or Judging()
    store = RunStore(run_dir, create=False)
    try:
        tasks = store.tasks_of(DocQATask)
        if not tasks:
            raise UserError(f"the run in {run_dir} holds no tasks; run 'deskbench run' into it first")
        corpus = Corpus.open(corpus_dir)
        known = _stored(store, model.id)
        labels, failed, asked = asyncio.run(classify_all(model, corpus, tasks, dpi, known))
        reused = sum(1 for tid, x in labels.items() if known.get(tid) is x)

        def keep(old: object | None) -> object:
            kept = dict(old) if isinstance(old, dict) else {}
            kept[model.id] = {tid: x.model_dump(mode="json") for tid, x in labels.items()}
            return kept

        store.update_meta(META_KEY, keep)
        accs = {s: run_accuracies(store, s, judging) for s in store.systems()}
    finally:
        store.close()
    report = modality_report(str(run_dir), model.id, dpi, labels, failed, accs, reused=reused, asked=asked)
    report.scoring = judging.summary()
    return report


# -- the report's breakdown -----------------------------------------------------------------

UNCLASSIFIED = "(unclassified)"


def stored_categories(store: RunStore) -> tuple[str, dict[str, str]] | None:
    """The Table 10 category of each task the run's kept labels classify, by the classifier with the
    most labels (the first by name on a tie), and that classifier; None when `analyse modality`
    has not run on it."""
    kept = store.meta(META_KEY)
    if not isinstance(kept, dict) or not kept:
        return None
    sizes = {name: len(v) for name, v in kept.items() if isinstance(v, dict) and v}
    if not sizes:
        return None
    classifier = min(sizes, key=lambda name: (-sizes[name], name))
    return classifier, {tid: label.category for tid, label in _stored(store, classifier).items()}


def modality_groups(items: Sequence[ItemScore], categories: Mapping[str, str],
                    opts: ScoreOptions) -> dict[str, GroupSummary]:
    """One system's scored items summarised by their task's category (as the report's domain and
    category breakdowns are), unlabelled tasks under UNCLASSIFIED."""
    import numpy as np

    from deskbench.tracks.docqa.scoring.docqa_summary import _Columns, summarize_group

    cols = _Columns.of(items)
    buckets: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        buckets.setdefault(categories.get(item.id, UNCLASSIFIED), []).append(index)
    order = [*CATEGORIES, UNCLASSIFIED]
    return {name: summarize_group(cols, np.array(buckets[name]), opts, with_f1_ci=False)
            for name in order if name in buckets}
