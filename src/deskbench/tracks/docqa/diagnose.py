"""docqa's part of `deskbench diagnose` (runs/diagnose.py): an answer is the whole output."""

from __future__ import annotations

from deskbench.runs.diagnose import is_refusal
from deskbench.runs.store import Episode
from deskbench.tracks.docqa.tasks import DocQASubmission


def answer_output(episode: Episode) -> tuple[str, str]:
    """An ended episode is ok when its submission has an answer (a refusal is content_policy)."""
    sub = episode.submission
    text = " ".join(a for a in sub.answer if isinstance(a, str)) if isinstance(sub, DocQASubmission) else ""
    if is_refusal(text):
        return "content_policy", text
    return ("ok", "") if text.strip() else ("no_answer", "")
