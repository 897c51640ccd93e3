"""What the report shows, as data: the shared frame (the runs, each track's section, the model
settings, the price table's date) and the shape of a section. Each track computes its own section
(`Track.report_section`, in tracks/<name>/report.py) into a `SectionData` of its own; render.py
draws it with the template the section names, so tests can check every number without parsing HTML.

This module imports no track: tracks import it."""

from __future__ import annotations

from pydantic import BaseModel, SerializeAsAny

from deskbench.analysis.compare import Comparison, ReliabilityComparison
from deskbench.models.prices import PRICES_AS_OF


class ModelSettingsRow(BaseModel):
    """What one model was sent (models/settings.py): a system's, stored with its run, or a judge's."""

    run: str  # the run directory ("" for a judge of this report)
    system: str  # the system name, or the judge's role
    model: str
    role: str
    sent: str  # every setting, sent or the provider's default
    dropped: list[str] = []  # judge preferences the model does not take
    note: str = ""


class SectionData(BaseModel):
    """A track's own report data: each track subclasses it with its fields. Figures are drawn only
    when a page is rendered (building the data for tests or the terminal draws nothing)."""

    def figures(self) -> dict[str, bytes]:
        """PNG figures by name; the section's template shows `images[name]` as a data URI."""
        return {}

    def context(self) -> dict[str, object]:
        """Template variables beyond `section`, `d` (this data) and `images` (constants, lookups)."""
        return {}


class ReportSection(BaseModel):
    """One track's part of the report, as `Track.report_section` returns it."""

    track: str  # the track's name
    title: str  # "docqa (MADQA)"
    # What renders the body: "package:file.html.j2" (a template shipped with the track's package) or
    # the name of one in report/templates; None: no body of its own (the comparison shows its systems).
    template: str | None = None
    data: SerializeAsAny[SectionData] = SectionData()
    n_systems: int = 0  # how many systems it shows
    summary: str = ""  # its words in the page's opening line ("2 docqa system(s).")
    comparisons: list[Comparison] = []  # `deskbench compare`'s tables over its systems (shown after every body)
    reliability: ReliabilityComparison | None = None  # one system run with --attempts K (two or more: in comparisons)
    model_settings: list[ModelSettingsRow] = []  # the judges it called, with what they were sent


class Report(BaseModel):
    run_dirs: list[str]
    sections: list[ReportSection] = []  # one per track among the runs, in the registry's order of tracks
    model_settings: list[ModelSettingsRow] = []  # every system's, as stored with its run (judges: in the sections)
    prices_as_of: str = PRICES_AS_OF  # the date of the built-in price table (the footer shows it)

    def section(self, track: str) -> ReportSection:
        """The section of `track` (KeyError when no run of the report is that track's)."""
        for s in self.sections:
            if s.track == track:
                return s
        raise KeyError(f"the report has no {track} section (its tracks: {', '.join(s.track for s in self.sections)})")

    def has_section(self, track: str) -> bool:
        return any(s.track == track for s in self.sections)

    @property
    def comparisons(self) -> list[Comparison]:
        """Every section's comparisons, in the order of the sections."""
        return [c for s in self.sections for c in s.comparisons]

    @property
    def every_model_setting(self) -> list[ModelSettingsRow]:
        """The runs' systems, then the judges of each section: the page's Model settings table."""
        return self.model_settings + [m for s in self.sections for m in s.model_settings]
