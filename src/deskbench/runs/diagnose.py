"""Why episodes failed, per system: the consulting paper's `diagnose_run.py` (Appendix D, §4.6),
for every track. Each episode gets exactly one category, the first that applies in this order:

    timeout            a model call or the sandbox's wall-time limit timed out
    content_policy     the provider refused (content policy / safety filter) or the reply is a refusal
    context_overflow   the prompt did not fit the model's context window
    step_limit         docqa: the agent was still searching when its step budget (--max-steps) ran out
    round_limit        analytics, deliverables: still calling tools when the round budget ran out
                       (what a track calls it: `Track.limit_category`)
    budget_limit       the episode reached its cost or token limit (run --max-cost episode=,
                       --token-budget episode=: deskbench's, no paper's; runs/budget.py)
    model_error        any other failed episode (API errors after retries, unparseable replies)
  then the track's own categories of an episode that ended (`Track.diagnose_output`, listed in
  `Track.diagnose_categories`), for the built-ins:
    no_answer          docqa: the submission has no answer; analytics qa: no final answer
    no_output          deliverables (and a task unknown to the run): no response text and no files
    file_generation_failed:<why>   a required output file is missing and a code call failed;
                       <why> from the last failed call's traceback: missing_library,
                       file_not_found, wrong_column, wrong_header, wrong_api, other
    file_not_produced  a required output file is missing and no code call failed (never written);
                       analytics: the sheet a file-generation task names, the chart of a
                       visualization task; deliverables: the package's required outputs
    ok                 docqa: an answer; analytics: what the task's category needs (qa an answer,
                       visualization a chart image, file generation the named sheet);
                       deliverables: a response and every required file

ok is "the episode produced what it must", not "correct": `deskbench score` says how many are right.
The failed-episode categories are the same for every track; what an ended episode had to produce is
its track's business (tracks/<name>/diagnose.py), with `code_output` below for a track whose agents
write files with code (the sandbox's execute_code calls say why a file is missing).

Per system it also reports cost, tokens and the success rate (ok episodes over all). A system's
cost is unknown (None) when any of its episodes called a model without a price.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field

from deskbench.models.prices import PRICES_AS_OF, per, total_cost
from deskbench.models.sdk_errors import CONTEXT, POLICY
from deskbench.runs.budget import is_budget_limit
from deskbench.runs.store import Episode
from deskbench.tasks.trajectory import ToolCallStep

_TIMEOUT = re.compile(r"time[d ]?out|timeout|deadline exceeded", re.I)
_REFUSAL = re.compile(r"^\W*(I('| a)m sorry|I can(no|')t (help|assist|comply)|I('m| am) (unable|not able) to (help|assist))",
                      re.I)
FILE_ERRORS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("missing_library", re.compile(r"ModuleNotFoundError|ImportError|No module named", re.I)),
    ("file_not_found", re.compile(r"FileNotFoundError|No such file or directory|IsADirectoryError", re.I)),
    ("wrong_header", re.compile(r"header|Unnamed: \d|ParserError|usecols", re.I)),
    ("wrong_column", re.compile(r"KeyError|not in index|None of \[|column", re.I)),
    ("wrong_api", re.compile(r"AttributeError|has no attribute|unexpected keyword argument|TypeError|"
                             r"takes \d+ positional argument", re.I)),
)
BUDGET_LIMIT = "budget_limit"  # an episode its cost or token limit stopped (runs/budget.py), not its agent's own
FAILED = ("timeout", "content_policy", "context_overflow")  # a failed episode's, by its error, before the limit
# what `code_output` says of an episode that ended without its files, in the order diagnose shows them
FILE_CATEGORIES = ("no_output", *(f"file_generation_failed:{name}" for name, _ in FILE_ERRORS),
                   "file_generation_failed:other", "file_not_produced")


def categories(track: str) -> tuple[str, ...]:
    """Every category an episode of `track` may get, in the order diagnose shows them: ok, the
    failed episodes' (the same for every track, its limit's among them), then its own."""
    from deskbench.contract.registry import get_track

    t = get_track(track)
    return tuple(dict.fromkeys(("ok", *FAILED, t.limit_category, BUDGET_LIMIT, "model_error",
                                *t.diagnose_categories())))


class EpisodeDiagnosis(BaseModel):
    task_id: str
    system: str
    attempt: int
    category: str
    detail: str = ""


class SystemDiagnosis(BaseModel):
    system: str
    episodes: int
    ok: int
    success_rate: float
    categories: dict[str, int]
    cost_usd: float | None  # None: unknown (an episode called a model without a price)
    cost_known: bool
    input_tokens: int
    output_tokens: int
    cost_per_ok_usd: float | None = None


class Diagnosis(BaseModel):
    systems: list[SystemDiagnosis]
    prices_as_of: str = PRICES_AS_OF  # the date of the built-in price table
    episodes: list[EpisodeDiagnosis] = Field(default_factory=list)


def _failed_calls(episode: Episode) -> list[ToolCallStep]:
    return [s for s in episode.trajectory if isinstance(s, ToolCallStep) and s.name == "execute_code"
            and (s.result.get("exit_code") or s.result.get("signal") or s.result.get("limit_hits"))]


def file_error_kind(tail: str) -> str:
    """The kind of a failed file-writing call, from the end of its traceback."""
    last = tail.strip().splitlines()[-1] if tail.strip() else ""
    for text in (last, tail):  # the exception line decides; the whole tail breaks ties
        for name, pattern in FILE_ERRORS:
            if pattern.search(text):
                return name
    return "other"


DETAIL_CHARS = 300  # of a one-line error
TAIL_CHARS = 2100  # of a longer one (an external agent's stderr: mcp/external.py keeps ~2,000)


def error_detail(error: str) -> str:
    """An error as diagnose shows it. One line: its first DETAIL_CHARS characters. Several (an
    external agent's stderr, a traceback): the last line first, the exception, which a cut from
    the top would lose, then the text's tail (its last TAIL_CHARS characters)."""
    lines = [line for line in error.strip().splitlines() if line.strip()]
    if len(lines) <= 1:
        return error.strip()[:DETAIL_CHARS]
    return f"{lines[-1].strip()[:DETAIL_CHARS]}\n{error.strip()[-TAIL_CHARS:]}"


def diagnose_episode(episode: Episode, task: BaseModel | None, track: str) -> EpisodeDiagnosis:
    """An episode's one category: a failed episode by its error (the same for every track), an
    ok one by what its track says it had to produce (`Track.diagnose_output`)."""
    from deskbench.contract.registry import get_track

    def verdict(category: str, detail: str = "") -> EpisodeDiagnosis:
        return EpisodeDiagnosis(task_id=episode.task_id, system=episode.system, attempt=episode.attempt,
                                category=category, detail=detail)

    error = episode.error or ""
    if episode.status != "ok":
        detail = error_detail(error)
        if _TIMEOUT.search(error):
            return verdict("timeout", detail)
        if POLICY.search(error):
            return verdict("content_policy", detail)
        if CONTEXT.search(error):
            return verdict("context_overflow", detail)
        if episode.status == "limit":
            return verdict(BUDGET_LIMIT if is_budget_limit(error) else get_track(track).limit_category, detail)
        return verdict("model_error", detail)
    category, detail = get_track(track).diagnose_output(episode, task)
    return verdict(category, detail[:DETAIL_CHARS])


def is_refusal(text: str) -> bool:
    """Whether a reply opens as a refusal ("I'm sorry, I can't help ...")."""
    return bool(_REFUSAL.search(text))


def code_output(episode: Episode, text: str, files: Sequence[str], missing: Sequence[str], *,
                answer_needed: bool = False) -> tuple[str, str]:
    """An ended episode of a track whose agents write files with code: its response `text`, the
    `files` it saved, and the required ones `missing` from them (the track knows which its task
    requires); `answer_needed`: the task asks for a final answer, files or not."""
    if is_refusal(text) and not files:
        return "content_policy", text
    if answer_needed and not text.strip():
        return "no_answer", f"{len(files)} files, no final answer" if files else ""
    if not text.strip() and not files:
        return "no_output", ""
    if missing:
        failed = _failed_calls(episode)
        if failed:
            tail = str(failed[-1].result.get("error_tail", ""))
            if not tail and "wall_time" in (failed[-1].result.get("limit_hits") or []):
                return "timeout", f"{missing[0]} not produced; the code call hit the wall-time limit"
            return (f"file_generation_failed:{file_error_kind(tail)}",
                    f"{', '.join(missing)} missing; last failed call: {tail.strip()[-200:]}")
        return "file_not_produced", f"{', '.join(missing)} missing"
    return "ok", ""


def diagnose(episodes: Sequence[Episode], tasks: Mapping[str, BaseModel] | None = None, *,
             track: str) -> Diagnosis:
    """Every episode's category and each system's totals; `tasks`: the run's tasks by id (what
    each episode had to produce); `track`: the run's (it says what an ok episode must produce)."""
    tasks = tasks or {}
    order = categories(track)
    per_episode = [diagnose_episode(ep, tasks.get(ep.task_id), track) for ep in episodes]
    systems = []
    for name in sorted({ep.system for ep in episodes}):
        eps = [ep for ep in episodes if ep.system == name]
        cats = Counter(d.category for d in per_episode if d.system == name)
        ok = cats.get("ok", 0)
        cost = total_cost(ep.usage.cost_usd for ep in eps)
        per_ok = per(cost, ok)
        systems.append(SystemDiagnosis(
            system=name, episodes=len(eps), ok=ok, success_rate=ok / len(eps) if eps else 0.0,
            categories={c: cats[c] for c in (*order, *sorted(set(cats) - set(order))) if cats.get(c)},
            cost_usd=None if cost is None else round(cost, 6), cost_known=cost is not None,
            input_tokens=sum(ep.usage.input_tokens for ep in eps),
            output_tokens=sum(ep.usage.output_tokens for ep in eps),
            cost_per_ok_usd=None if per_ok is None else round(per_ok, 6)))
    return Diagnosis(systems=systems, episodes=per_episode)
