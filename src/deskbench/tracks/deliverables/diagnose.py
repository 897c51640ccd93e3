"""deliverables' part of `deskbench diagnose` (runs/diagnose.py): an episode that ended had to
produce a response and every output file its package requires."""

from __future__ import annotations

from pydantic import BaseModel

from deskbench.runs.diagnose import FILE_CATEGORIES, code_output
from deskbench.runs.store import Episode
from deskbench.tracks.deliverables.tasks import DeliverableSubmission, DeliverableTask

CATEGORIES = FILE_CATEGORIES  # what deliverables_output gives besides ok and content_policy, timeout


def deliverables_output(episode: Episode, task: BaseModel | None) -> tuple[str, str]:
    """An ended episode's category: its response and the package's required outputs."""
    sub = episode.submission
    text = sub.response if isinstance(sub, DeliverableSubmission) else ""
    files = [f.name for f in sub.files] if isinstance(sub, DeliverableSubmission) else []
    missing = [o.name for o in task.required_outputs if o.name not in files] if isinstance(task, DeliverableTask) else []
    return code_output(episode, text, files, missing)
