"""docqa's web screens for people (Track.web_screens): the human baseline (MADQA Appendix C.2),
`deskbench serve --corpus DIR --tasks T.jsonl --out RUNDIR` (app.py), answered in batches."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from deskbench.contract.web import ServedApp, ServeRequest, WebScreens
from deskbench.errors import UserError


class DocQAScreens(WebScreens):
    def app(self, request: ServeRequest) -> ServedApp | None:
        """The human baseline, when the corpus, the tasks and the run directory are all given."""
        if request.corpus is None or request.tasks is None or request.out is None:
            return None
        if request.top_k < 1:
            raise UserError(f"--top-k {request.top_k} is not valid; use 1 or more")
        if request.batch_size < 1:
            raise UserError(f"--batch-size {request.batch_size} is not valid; use 1 or more")
        from deskbench.tracks.docqa.web.app import create_app
        from deskbench.web.store import WebStore

        out = request.out
        app = create_app(request.corpus, request.tasks, out, oracle=request.oracle, top_k=request.top_k,
                         calibration=request.calibration, batch_size=request.batch_size)
        web = WebStore(out)
        idle = sorted(set(web.users()) - {u for b in web.batches() for u in b.users})
        warnings = [f"warning: {', '.join(idle)} have no batch and will see no question; list batches with"
                    f" 'deskbench serve batches --out {out}', assign with 'deskbench serve assign --out {out} --user NAME BATCH'"
                    ] if idle else []
        return ServedApp(app=app, what="human baseline", warnings=warnings)

    def batch_tasks(self, tasks: Path) -> Sequence[BaseModel]:
        from deskbench.tracks.docqa.tasks import read_tasks

        return read_tasks(tasks).items

    def people_systems(self, user: str) -> Sequence[str]:
        from deskbench.tracks.docqa.humans import human_system

        return [human_system(user, oracle) for oracle in (False, True)]


SCREENS = DocQAScreens()
