"""What every verifier shares: its result, the context it reads, and the Verifier protocol.

Unobservable means the thing to check is not there to look at (a missing output file, a label
not found, no judge for an `llm_check`); the pass rate counts it as failed and reports it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from deskbench.tracks.deliverables.scoring.office import (
    Document,
    UnreadableFile,
    markdown_document,
    read_output,
)
from deskbench.untrusted import FileLimitError

Status = Literal["pass", "fail", "unobservable"]
EVIDENCE_CHARS = 240


class VerifierResult(BaseModel):
    id: str = ""
    kind: str = ""
    status: Status
    evidence: str
    judged: bool = False


LlmJudge = Callable[[str, str], tuple[bool, str]]
"""(criterion, response text) -> (satisfied, reason); supplied by whoever runs the judge."""

AsyncLlmJudge = Callable[[str, str], Awaitable[tuple[bool, str]]]
"""The same over a model call (`verifiers_judge.llm_check_judge`), for `arun_verifiers`."""


class JudgeError(Exception):
    """A judge that could not decide (the call failed, the reply never validated): the
    `llm_check` is unobservable with this message as evidence, never failed."""


@dataclass
class VerifierContext:
    """What verifiers look at: the response text and the folder of produced files."""

    response: str
    outputs_dir: Path | None = None
    judge: LlmJudge | None = None
    _docs: dict[str, Document | str] = field(default_factory=dict)

    def document(self, name: str | None) -> Document | str:
        """The response (name None) or an output file as a Document; a string says why not."""
        key = name or ""
        if key not in self._docs:
            self._docs[key] = self._load(name)
        return self._docs[key]

    def path(self, name: str) -> Path | None:
        """The produced file `name`, or None if there is none."""
        from deskbench.runs.outputs import output_file

        return output_file(self.outputs_dir, name)  # inside the folder, symlinks resolved

    def _load(self, name: str | None) -> Document | str:
        if name is None:
            return markdown_document(self.response)
        if self.outputs_dir is None:
            return f"no outputs directory given, so {name} cannot be read"
        path = self.path(name)
        if path is None:
            return f"output file {name} not found in {self.outputs_dir}"
        try:
            return read_output(path)
        except FileLimitError as exc:  # over an untrusted-file limit: unobservable, counted as failed
            return exc.verdict.about(f"output file {name}").message
        except UnreadableFile as exc:
            return f"output file {name} does not open: {exc}"


class Verifier(Protocol):
    def __call__(self, spec: Any, ctx: VerifierContext) -> VerifierResult: ...


def clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EVIDENCE_CHARS else text[: EVIDENCE_CHARS - 1] + "…"


def result(status: Status, evidence: str, *, judged: bool = False) -> VerifierResult:
    return VerifierResult(status=status, evidence=clip(evidence), judged=judged)


def where(spec: Any) -> str:
    return spec.file or "response"
