"""What an export says about each episode, gathered once from the run, in no tool's format: the
task's question and gold answer, the transcript (page texts filled in from the corpus), the
judges' transcripts, the item's score (the latest scoring `deskbench score` stored in the run
that covered it and still holds, judges' verdicts included, named; else the track's default
scorer offline, no judge, labelled so), and a summary of the trajectory.

What a task's question and gold answer are is the track's business: its `export_task` and
`export_answer` hooks (contract/track.py) say it; a track that says nothing exports its first
user message as the input, no target and no answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deskbench.contract.export import TaskText
from deskbench.contract.registry import get_track
from deskbench.contract.track import Track
from deskbench.runs.identity import SystemIdentity, stored_identities
from deskbench.runs.outcomes import ItemOutcome, ScorerRequest
from deskbench.runs.protocol import ProtocolNote, stored_protocol
from deskbench.runs.store import Episode, RunStore, UnreadableTranscript
from deskbench.runs.transcript import ModelCallEvent, TranscriptDoc, expand, open_recorded_corpus
from deskbench.tasks.trajectory import ModelCallStep, ToolCallStep

if TYPE_CHECKING:
    from deskbench.corpus import Corpus


@dataclass
class SampleSource:
    """One episode and everything an export writes about it."""

    episode: Episode
    task: TaskText
    answer: str  # the submission's answer as text ("" when the episode produced none)
    transcript: TranscriptDoc | None
    judges: dict[str, TranscriptDoc]
    outcome: ItemOutcome | None  # None: the track's scoring path does not score this episode
    summary: dict[str, Any]
    scored: Scored | None = None  # who decided `outcome`


@dataclass(frozen=True)
class Scored:
    """Which scoring decided an item: a stored one (by number, settings and time) or the offline
    default scorer, with the judges' verdicts and reasoning of its --items-out row and why it is
    unscored."""

    by: str
    scoring: int | None = None  # the stored scoring's number; None: offline
    verdicts: dict[str, Any] = field(default_factory=dict)
    reason: str = ""


@dataclass
class SystemSource:
    """One system of the run: its identity, protocol notes, corpus and episodes."""

    run_dir: Path
    store: RunStore  # open while the system is being exported (blobs are read from it)
    track: Track
    system: str
    identity: SystemIdentity | None
    protocol: list[ProtocolNote]
    tasks_file: str | None
    corpus: Corpus | None
    samples: list[SampleSource]
    task_count: int


def _first_user_text(doc: TranscriptDoc | None) -> str:
    if doc is None:
        return ""
    for m in doc.conversation(0) if any(isinstance(e, ModelCallEvent) for e in doc.events) else []:
        if m.get("role") == "user":
            content = m.get("content")
            return content if isinstance(content, str) else " ".join(str(p.get("text", "")) for p in content or [])
    return ""


def trajectory_summary(episode: Episode) -> dict[str, Any]:
    """The episode's effort in numbers: steps by kind, model calls, tool calls by name, tokens,
    seconds, cost (None: unknown), and the citations its submission made."""
    kinds: dict[str, int] = {}
    tools: dict[str, int] = {}
    for step in episode.trajectory:
        kinds[step.kind] = kinds.get(step.kind, 0) + 1
        if isinstance(step, ToolCallStep):
            tools[step.name] = tools.get(step.name, 0) + 1
    sub = episode.submission
    citations = getattr(sub, "citations", None)
    usage = episode.usage
    return {
        "steps": len(episode.trajectory),
        "steps_by_kind": kinds,
        "model_calls": sum(isinstance(s, ModelCallStep) for s in episode.trajectory),
        "tool_calls": tools,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "seconds": round(usage.seconds, 4),
        "cost_usd": usage.cost_usd,
        "citations": [json.loads(c.model_dump_json()) for c in citations] if isinstance(citations, list) else None,
        "files": [f.name for f in getattr(sub, "files", None) or []] or None,
    }


def _open_corpus(store: RunStore, system: str, override: Path | None) -> Corpus | None:
    if override is not None:
        from deskbench.corpus import Corpus

        return Corpus.open(override)  # a UserError names a wrong --corpus
    return open_recorded_corpus(store, system)


OFFLINE = "the track's default scorer, offline (no judge)"


def _outcomes(track: Track, store: RunStore, system: str) -> dict[tuple[str, int], tuple[ItemOutcome, Scored]]:
    """Each item's outcome: from the latest stored scoring that covered it and still holds
    (runs/scorings.py), else as `deskbench score RUN` scores it with no flags (offline)."""
    from deskbench.runs.current_scorings import current_items

    held, stale = current_items(store, system)
    out = {key: (ItemOutcome(task_id=item.task_id, attempt=item.attempt, system=system, status=item.status,
                             score=item.score, correct=item.correct),
                 Scored(scoring.label(), scoring.id, dict(item.row.get("judge") or {}), item.reason))
           for key, (scoring, item) in held.items()}
    if set(out) >= store.done(system):
        return out
    with track.scorer_options(ScorerRequest()) as options:
        offline = track.outcomes(store, system, options)
    for o in offline:
        key = (o.task_id, o.attempt)
        if key not in out:
            note = f"{OFFLINE}: {stale[key].note()}" if key in stale else f"{OFFLINE}: no stored scoring covers it"
            out[key] = (o, Scored(note))
    return out


def systems(run_dir: Path, corpus: Path | None = None) -> Iterator[SystemSource]:
    """Every system of the run, its episodes in task order then attempt."""
    store = RunStore(run_dir, create=False)
    try:
        track = get_track(store.track())
        tasks = {str(getattr(t, "id", "")): t for t in store.all_tasks()}
        order = {task_id: i for i, task_id in enumerate(tasks)}
        identities = stored_identities(store)
        notes = stored_protocol(store)
        tasks_file = store.meta("tasks_file") or store.meta("packages")
        for system in store.systems():
            opened = _open_corpus(store, system, corpus)
            outcomes = _outcomes(track, store, system)
            episodes = sorted(store.episodes(system), key=lambda e: (order.get(e.task_id, len(order)), e.attempt))
            hashes = store.episode_task_hashes(system)
            samples = []
            for ep in episodes:
                ep.task_hash = hashes.get((ep.task_id, system, ep.attempt))
                try:
                    doc = store.transcript(ep.task_id, system, ep.attempt)
                    judged = store.judge_transcripts(ep.task_id, system, ep.attempt)
                except UnreadableTranscript as exc:  # named in one line (store.py), left out; the others are written
                    store.note_unreadable(exc.episode)
                    continue
                doc = expand(doc, opened) if doc is not None else None
                judges = {name: expand(j, opened) for name, j in judged.items()}
                task = tasks.get(ep.task_id)
                text = (track.export_task(task) if task is not None else None) or TaskText(_first_user_text(doc), [])
                answer = track.export_answer(ep.submission)
                outcome, scored = outcomes.get((ep.task_id, ep.attempt), (None, None))
                samples.append(SampleSource(ep, text, answer, doc, judges, outcome, trajectory_summary(ep), scored))
            yield SystemSource(run_dir=run_dir, store=store, track=track, system=system, identity=identities.get(system),
                               protocol=notes.get(system, []), tasks_file=tasks_file if isinstance(tasks_file, str) else None,
                               corpus=opened, samples=samples, task_count=len(tasks))
    finally:
        store.close()


def image_bytes(ref: str, store: RunStore, corpus: Corpus | None) -> tuple[bytes, str] | str:
    """An image the transcript refers to (`page:<doc>#<page>@<dpi>`, `blob:<sha256>`), as (bytes,
    mime), or why it cannot be shown. A page is rendered again from the corpus at the recorded dpi
    (the same page; not byte for byte the image sent when a byte cap shrank it)."""
    from deskbench.errors import UserError

    if ref.startswith("blob:"):
        blob = store.blob(ref.removeprefix("blob:"))
        return (blob.data, blob.mime) if blob is not None else "the image is not in the run's blobs"
    if ref.startswith("page:"):
        where, _, dpi = ref.removeprefix("page:").rpartition("@")
        doc, _, page = where.rpartition("#")
        if corpus is None:
            return "the corpus the run used is not available"
        if not (page.isdigit() and dpi.isdigit()):
            return "the reference is not a page"
        from deskbench.corpus.images import ImageSpec

        try:
            return corpus.page_image(doc, int(page), ImageSpec(dpi=int(dpi), format="png")), "image/png"
        except (UserError, ValueError) as exc:
            return f"the corpus cannot render it ({exc})"
    return "unknown image reference"
