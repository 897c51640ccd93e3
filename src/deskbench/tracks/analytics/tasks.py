"""analytics tasks (AIDABench §3): question answering, visualization, file generation.

One task a JSON Lines record:

    {"id": "an-0001", "category": "qa", "instruction": "...",
     "inputs": ["inputs/an-0001/sales.xlsx"], "difficulty_steps": 8,
     "answer": "12.34", "answer_value": 12.34, "computation": "...", "key_points": [...]}

Input paths are relative to the tasks file's folder; a task has 1 to 14 of them (the paper's
largest cross-file task has 14). Difficulty is the number of expert steps, bucketed as the
paper does: easy <= 6, medium 7-12, hard >= 13. QA tasks carry a reference answer (and the
computation that produced it); visualization tasks carry rubric key points, what the paper's
chart judge scores against (Listings 3-4: question, key points, image), and optionally a
deskbench chart spec (the plotted values, from the generator; AIDA's release has none);
file-generation tasks carry a reference file with the sheets and columns the output must have,
and `extra_outputs` when the task asks for several files (AIDA rows do): each is scored, the
task passes when all do (tracks/analytics/scoring/analytics.py says why).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from deskbench.tasks.jsonl import TASKS, ReadResult, read_jsonl, write_jsonl
from deskbench.tasks.outputs import OutputFileRecord, StopReason

Category = Literal["qa", "visualization", "file_generation"]
CATEGORIES: tuple[Category, ...] = get_args(Category)
Difficulty = Literal["easy", "medium", "hard"]
ChartType = Literal["bar", "line", "pie", "scatter", "table"]
MAX_INPUTS = 14


def difficulty_level(steps: int) -> Difficulty:
    """AIDABench's buckets: easy <= 6 steps, medium 7-12, hard >= 13."""
    if steps <= 6:
        return "easy"
    return "medium" if steps <= 12 else "hard"


class ChartSeries(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    labels: list[str]
    values: list[float]

    @model_validator(mode="after")
    def _aligned(self) -> ChartSeries:
        if len(self.labels) != len(self.values):
            raise ValueError("labels and values must have the same length")
        return self


class ChartSpec(BaseModel):
    """What the correct chart shows: type, axes, and every plotted value."""

    model_config = ConfigDict(extra="forbid")
    chart_type: ChartType
    title_hint: str = ""
    x_axis: str = ""
    y_axis: str = ""
    unit: str = ""
    order: Literal["as_given", "descending", "ascending", "chronological"] = "as_given"
    series: list[ChartSeries] = Field(min_length=1)
    tolerance_pct: float = Field(default=1.0, ge=0)


class SheetSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    columns: list[str] = Field(min_length=1)
    rows: int = Field(ge=0)  # data rows below the header


class ReferenceFile(BaseModel):
    """The file a correct answer produces, written by the generator, and its expected shape."""

    model_config = ConfigDict(extra="forbid")
    path: str  # relative to the tasks file's folder
    output_name: str  # the name the instruction asks for
    sheets: list[SheetSpec] = Field(min_length=1)
    # None: read from the instruction when scoring (the paper's Stage 1, sheets_structure.read_structure:
    # strict only for an order, an exact header or a layout); True/False: decided for this task (by
    # the importer from the same reading, or by its author), `structure_reason` saying why
    strict_structure: bool | None = None
    structure_reason: str = ""


class AnalyticsTask(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, description="Unique task id.")
    category: Category = Field(description="qa (a reference answer), visualization (key_points; a chart spec "
                                           "optional) or file_generation (reference_file, extra_outputs).")
    instruction: str = Field(min_length=1, description="What the agent is asked to do.")
    inputs: list[str] = Field(min_length=1, max_length=MAX_INPUTS,
                              description="Input files, relative to the tasks file's folder (1 to 14).")
    difficulty_steps: int = Field(ge=1, description="Expert steps: easy <= 6, medium 7-12, hard >= 13.")
    domain: str = ""
    template: str = ""  # the generator template that made it
    params: dict[str, str | int | float] = Field(default_factory=dict)
    answer: str | None = Field(default=None, description="qa: the reference answer.")
    answer_value: float | None = Field(default=None, description="qa: the answer as a number, when it is one.")
    answer_unit: str | None = None
    computation: str | None = None
    key_points: list[str] = Field(default_factory=list)
    chart: ChartSpec | None = None  # visualization: optional, adds its labels to the glyph check
    chart_file: str | None = Field(default=None, description="visualization: the image the task asks for "
                                                              "(AIDA's output_file), when it names one.")
    reference_file: ReferenceFile | None = None
    extra_outputs: list[ReferenceFile] = Field(
        default_factory=list, description="file_generation: further files the task asks for, each with its reference.")

    @model_validator(mode="after")
    def _by_category(self) -> AnalyticsTask:
        if self.category == "qa" and not self.answer:
            raise ValueError("a qa task needs a reference answer")
        if self.category == "visualization" and not self.key_points:
            raise ValueError("a visualization task needs key_points (the chart judge's rubric)")
        if self.category == "file_generation" and self.reference_file is None:
            raise ValueError("a file_generation task needs reference_file")
        if self.extra_outputs and self.reference_file is None:
            raise ValueError("extra_outputs needs reference_file (the first output)")
        names = [o.output_name.casefold() for o in self.outputs]
        if len(set(names)) != len(names):
            raise ValueError("two outputs share a name")
        return self

    @property
    def outputs(self) -> list[ReferenceFile]:
        """Every file the task asks for, with its reference: reference_file first."""
        return ([self.reference_file] if self.reference_file is not None else []) + list(self.extra_outputs)

    @property
    def difficulty(self) -> Difficulty:
        return difficulty_level(self.difficulty_steps)

    def input_paths(self, base: Path) -> list[Path]:
        return [base / p for p in self.inputs]


def read_tasks(path: Path, *, skip_invalid: bool = False) -> ReadResult[AnalyticsTask]:
    """Every task in `path`; a bad line stops the read naming the file, line and field."""
    return read_jsonl(path, AnalyticsTask, skip_invalid=skip_invalid, unique_id=True, caps=TASKS)


def write_tasks(path: Path, tasks: list[AnalyticsTask]) -> None:
    write_jsonl(path, tasks)


def check_inputs(task: AnalyticsTask, tasks_dir: Path) -> list[Path]:
    """The task's input files; two with the same name would collide under /mnt/data."""
    paths = task.input_paths(tasks_dir)
    names = [p.name for p in paths]
    if len(set(names)) != len(names):
        raise ValueError(f"task {task.id}: two input files share a name ({', '.join(names)})")
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise ValueError(f"task {task.id}: input file not found: {missing[0]}")
    return paths


class AnalyticsSubmission(BaseModel):
    """One analytics episode's outcome: the final reply, the files it produced, its effort.

    `track` tells it apart from a docqa submission when both sit in run stores; `files_dir` is
    relative to the run directory. `file_warnings` keeps, for every output file, the lines of
    stderr that later checks read (matplotlib's missing-glyph warnings) from the call that wrote
    its final version: a chart redrawn with the right font is not blamed for an earlier attempt.
    """

    model_config = ConfigDict(extra="forbid")
    track: Literal["analytics"] = "analytics"
    id: str
    answer: str = ""
    files: list[OutputFileRecord] = Field(default_factory=list)
    files_dir: str = ""
    rounds: int = Field(default=0, ge=0)  # execute_code calls
    stop: StopReason = "answer"
    file_warnings: dict[str, list[str]] = Field(default_factory=dict)
