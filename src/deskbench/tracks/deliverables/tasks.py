"""Deliverables task packages (the consulting DRA paper, §3 and Appendix A).

A package is a folder: `task.yaml` plus the input files it names. task.yaml holds the prompt,
its prompt class (CRP, RCP, SCP, LDP, FSP) and corpus discipline (prepended to the prompt as the
paper does), authorized sources, required output files, the golden answer or range, the
solution logic, the lazy-AI and expert tests, the embedded traps (each naming the verifiers
that catch it), the verifier specs and the 0-3 rubric. `load_package` validates all of it and
raises a UserError of one line naming the file, the field and the fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from deskbench.errors import UserError, read_user_file
from deskbench.tasks.outputs import OutputFileRecord, StopReason
from deskbench.tracks.deliverables.verifier_specs import VERIFIER_KINDS, Unit, VerifierSpec

PromptClass = Literal["CRP", "RCP", "SCP", "LDP", "FSP"]
CorpusDiscipline = Literal["closed", "hybrid", "open"]
OutputFormat = Literal["docx", "xlsx", "pptx", "json", "md", "csv"]
TrapKind = Literal[
    "footnote_override",
    "unit_mismatch",
    "stale_placeholder",
    "unweighted_average",
    "date_format",
    "misnamed_item",
    "default_assumption",
    "other",
]
RubricCode = Literal["DI", "AR", "RF", "EP", "FD"]
RUBRIC_CODES: tuple[RubricCode, ...] = ("DI", "AR", "RF", "EP", "FD")

TABLE_19: dict[RubricCode, tuple[str, tuple[str, str, str, str]]] = {
    "DI": ("Data Integrity & Source Discipline", (
        "Completely ignores source constraints; fabricated data or sources.",
        "Multiple factual errors; vague citations; use of 1-2 unauthorized sources.",
        "Mostly accurate with minor (1-2) errors; primary data from permitted sources; 10-20% sourcing gaps.",
        "100% adherence to authorized sources; all facts verified; no hallucinations.",
    )),
    "AR": ("Analytical Rigor", (
        "Illogical or self-contradicting; fails to identify the core task; no inference attempted.",
        "Gaps in the logic; no evidence-backed conclusions; misses interdependencies or key variables.",
        "Sound reasoning with minor gaps; identifies most key variables; clear logic chain but has small leaps.",
        'Strong logic with cause-effect; identifies "hidden" variables; MECE decomposition of the problem.',
    )),
    "RF": ("Relevance & Focus", (
        "Response dominated by noise; includes forbidden content.",
        "50-60% relevant; 10-20% scope creep.",
        "70-80% relevant and within scope; low tangential content (<20%).",
        "90%+ relevant; excludes out-of-scope content.",
    )),
    "EP": ("Execution Precision", (
        "Fundamental math errors; wrong units; black-box output.",
        "Correct approach but results off by 10%+; partial unit normalization; gaps in methodology.",
        "Minor computational errors (<5%); all units normalized; most calculation steps shown.",
        "100% accurate calculations; unit discipline; complete audit trail.",
    )),
    "FD": ("Format & Deliverability", (
        "Ignores format; unusable output; no actionable insights.",
        "Partial format compliance; lack of specificity in recommendations.",
        "Follows format with minor (10-20%) deviations; actionable but some interpretation needed.",
        "100% compliance with format/constraints; actionable and executive-ready recommendations.",
    )),
}
"""The paper's Table 19 anchors (Appendix B.1), score 0..3 per criterion."""

DISCIPLINE_TEXT: dict[CorpusDiscipline, str] = {
    "closed": "CORPUS DISCIPLINE: CLOSED. Use only the files provided with this task. "
    "No web search, external data or outside assumptions.",
    "hybrid": "CORPUS DISCIPLINE: HYBRID. Use the files provided with this task and only the "
    "external sources authorized below; cite every external figure.",
    "open": "CORPUS DISCIPLINE: OPEN. You may use public sources beyond the files provided; "
    "cite every external figure.",
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AuthorizedSource(_Strict):
    name: str
    kind: Literal["input_file", "external"] = "input_file"
    note: str = ""


class RequiredOutput(_Strict):
    name: str = Field(min_length=1, pattern=r"^[^/\\]+\.[A-Za-z0-9]+$")
    format: OutputFormat
    sections: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _ext(self) -> RequiredOutput:
        if not self.name.lower().endswith("." + self.format):
            raise ValueError(f"name {self.name!r} must end in .{self.format}")
        return self


class GoldenValue(_Strict):
    """One golden figure: exact (with tolerance) or a range, in a stated unit."""

    name: str
    value: float | None = None
    range: tuple[float, float] | None = None
    unit: Unit | None = None
    abs_tol: float | None = Field(default=None, ge=0)
    rel_tol: float | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _one(self) -> GoldenValue:
        if (self.value is None) == (self.range is None):
            raise ValueError("give exactly one of value or range")
        return self


class Golden(_Strict):
    answer: str = Field(min_length=1)
    decision: str | None = None
    values: list[GoldenValue] = Field(default_factory=list)


class Trap(_Strict):
    """An embedded cognitive trap: what it is, what the lazy answer would be, who catches it."""

    id: str
    kind: TrapKind
    description: str
    lure: str = ""  # the value or text a trap-falling response would give
    location: str = ""  # the input file (and where in it) holding the trap
    verifiers: list[str] = Field(min_length=1)


class RubricCriterion(_Strict):
    code: RubricCode
    name: str
    anchors: dict[int, str]

    @model_validator(mode="after")
    def _scale(self) -> RubricCriterion:
        if sorted(self.anchors) != [0, 1, 2, 3]:
            raise ValueError("anchors must give scores 0, 1, 2 and 3")
        return self


def table19_rubric() -> list[RubricCriterion]:
    """The five criteria with the paper's anchors, in DI, AR, RF, EP, FD order."""
    return [
        RubricCriterion(code=c, name=TABLE_19[c][0], anchors=dict(enumerate(TABLE_19[c][1])))
        for c in RUBRIC_CODES
    ]


class DeliverableTask(_Strict):
    """A validated task.yaml; `directory` (set by load_package) locates its input files."""

    id: str = Field(min_length=1)
    title: str = ""
    prompt_class: PromptClass
    corpus_discipline: CorpusDiscipline
    prompt: str = Field(min_length=1)
    inputs: list[str] = Field(min_length=1)
    authorized_sources: list[AuthorizedSource] = Field(default_factory=list)
    required_outputs: list[RequiredOutput] = Field(default_factory=list)
    golden: Golden
    solution_logic: list[str] = Field(min_length=1)
    lazy_ai_test: str = Field(min_length=1)
    expert_test: str = Field(min_length=1)
    traps: list[Trap] = Field(default_factory=list)
    verifiers: list[VerifierSpec] = Field(min_length=1)
    rubric: list[RubricCriterion]
    directory: Path | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _consistent(self) -> DeliverableTask:
        ids = [v.id for v in self.verifiers]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"verifier ids must be unique; repeated: {', '.join(dupes)}")
        for trap in self.traps:
            unknown = [v for v in trap.verifiers if v not in ids]
            if unknown:
                raise ValueError(f"trap {trap.id!r} names unknown verifiers {unknown}")
        if sorted(c.code for c in self.rubric) != sorted(RUBRIC_CODES):
            raise ValueError("rubric must have exactly the criteria DI, AR, RF, EP, FD")
        outputs = {o.name for o in self.required_outputs}
        for spec in self.verifiers:
            if spec.file is not None and spec.file not in outputs:
                raise ValueError(f"verifier {spec.id!r} reads {spec.file!r}, not a required output")
        return self

    @property
    def full_prompt(self) -> str:
        """The prompt as the agent sees it: corpus discipline first, as the paper prepends it."""
        lines = [DISCIPLINE_TEXT[self.corpus_discipline]]
        external = [s for s in self.authorized_sources if s.kind == "external"]
        if external:
            lines.append("Authorized external sources: " + "; ".join(s.name for s in external))
        return "\n".join(lines) + "\n\n" + self.prompt

    def input_paths(self) -> list[Path]:
        base = self.directory or Path(".")
        return [base / name for name in self.inputs]

    def missing_input(self) -> str | None:
        """The episode's error when an input file is not on disk (the first such), else None: an
        agent checks before it spends anything on the task."""
        missing = [str(p) for p in self.input_paths() if not p.is_file()]
        return f"task {self.id}: input file not found: {missing[0]}" if missing else None


def _field_error(path: Path, exc: ValidationError) -> UserError:
    err = exc.errors(include_url=False)[0]
    loc = [str(p) for p in err["loc"]]
    kind = ""
    if len(loc) >= 3 and loc[0] == "verifiers" and loc[2] in VERIFIER_KINDS:
        kind = f" ({loc.pop(2)} verifier)"  # the union's tag, not a field
    where = (".".join(loc) or "(top level)") + "'" + kind
    msg = err["msg"].removeprefix("Value error, ")
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return UserError(f"{path}: field '{where}: {msg}{more}; fix task.yaml and load again")


def parse_task(data: Any, path: Path) -> DeliverableTask:
    """Validate already-parsed YAML; errors name `path` and the field."""
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of task fields at the top level; fix task.yaml")
    try:
        return DeliverableTask.model_validate(data)
    except ValidationError as exc:
        raise _field_error(path, exc) from None


TASK_YAML_BYTES = 4 << 20  # a task.yaml's size cap: the demo's are ~5 KB, a paper task's under 50 KB


# libyaml's safe loader and dumper when PyYAML was built with it: the same documents and the same
# text (checked on every bundled and generated task.yaml), in about a tenth of the time; the pure
# Python ones otherwise.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load_package(directory: Path) -> DeliverableTask:
    """Read and validate `directory/task.yaml`, and check that every input file exists."""
    path = directory / "task.yaml"
    if not path.exists():
        raise UserError(f"{path}: no such file; a task package is a folder with task.yaml")
    try:  # a regular file of at most TASK_YAML_BYTES (a pipe or /dev/zero is one line, not a hang)
        text = read_user_file(path, "task.yaml", TASK_YAML_BYTES).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 ({exc.reason}); save task.yaml as UTF-8") from None
    try:
        data = yaml.load(text, Loader=_LOADER)  # a safe loader (libyaml's when present)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{path}:{where} invalid YAML ({problem}); fix the syntax") from None
    task = parse_task(data, path)
    task.directory = directory
    for i, name in enumerate(task.inputs):
        if not (directory / name).is_file():
            raise UserError(
                f"{path}: field 'inputs.{i}': input file {name!r} is missing from {directory}; "
                "add the file or remove it from inputs"
            )
    return task


def dump_task(task: DeliverableTask) -> str:
    """task.yaml text: field order as declared, keys unsorted, stable across runs."""
    data = task.model_dump(mode="json", by_alias=True, exclude_none=True)
    text: str = yaml.dump(data, Dumper=_DUMPER, sort_keys=False, allow_unicode=True, width=100)  # yaml is untyped here
    return text


def load_packages(path: Path) -> list[DeliverableTask]:
    """One package (a folder with task.yaml) or a folder of packages, sorted by folder name."""
    if (path / "task.yaml").is_file():
        return [load_package(path)]
    if not path.exists():
        from deskbench.paths import tasks_missing

        raise tasks_missing(path)
    if not path.is_dir():
        raise UserError(f"{path}: not a folder; give a task package (a folder with task.yaml) or a folder of them")
    found = sorted(p for p in path.iterdir() if (p / "task.yaml").is_file())
    if not found:
        raise UserError(f"{path}: no task packages in it (no */task.yaml); generate some with "
                        "'deskbench generate deliverables'")
    tasks = [load_package(p) for p in found]
    ids = [t.id for t in tasks]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise UserError(f"{path}: two packages share the id {dupes[0]!r}; give each task.yaml its own id")
    return tasks


class DeliverableSubmission(BaseModel):
    """One deliverables episode: the response text (markdown) and the files it produced.

    `track` tells it apart from the other tracks' submissions in a run store; `files_dir` is
    relative to the run directory."""

    model_config = ConfigDict(extra="forbid")
    track: Literal["deliverables"] = "deliverables"
    id: str
    response: str = ""
    files: list[OutputFileRecord] = Field(default_factory=list)
    files_dir: str = ""
    rounds: int = Field(default=0, ge=0)
    stop: StopReason = "answer"
