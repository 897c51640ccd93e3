"""The citation-domain verifier (the consulting DRA paper, §4.7 and §4.12): every URL a
deliverable cites must point to a task-authorized domain.

o3-deep-research cited real, resolving pages (a Chinese electronics datasheet, Stack Overflow
questions on pandas) on a closed-corpus logistics task; a well-formedness check passes them, a
domain allow-list does not. URLs are found in the text (http/https, and bare `www.` hosts) and,
for docx/xlsx/pptx outputs, in the external hyperlink targets a reader never sees in the text.
A host matches an allowed domain if it equals it or is a subdomain of it; "www." is ignored.
"""

from __future__ import annotations

import html
import re
import zipfile
from pathlib import Path

from deskbench.tracks.deliverables.scoring.verifier_base import VerifierContext, VerifierResult
from deskbench.tracks.deliverables.scoring.verifier_base import result as _res
from deskbench.tracks.deliverables.scoring.verifier_base import where as _where
from deskbench.tracks.deliverables.verifier_specs import CitationDomainsSpec

_HOST = r"(?:[^\W_]|[.-])+"  # letters (IDN too), digits, dots, hyphens
URL = re.compile(
    rf"\bhttps?://(?:[^\s/@<>\"'`]+@)?(?P<host>{_HOST})"  # scheme, optional user@, host
    rf"|(?<![\w.@/-])(?P<www>www\.{_HOST})",  # a bare www. host
    re.IGNORECASE,
)
_RELATIONSHIP = re.compile(r"<Relationship\b[^>]*>", re.IGNORECASE)
_TARGET = re.compile(r'\bTarget="([^"]*)"')
_OFFICE = {".docx", ".xlsx", ".pptx", ".xlsm"}
_RELS_BYTES = 1 << 20  # a relationship part larger than this is not read


def cited_hosts(text: str) -> list[str]:
    """The host of every URL in `text`, in order, lower-case, without "www." or a trailing dot."""
    hosts = []
    for m in URL.finditer(text):
        host = (m.group("host") or m.group("www")).casefold().strip(".-")
        host = host.removeprefix("www.")
        if "." in host:
            hosts.append(host)
    return hosts


def host_allowed(host: str, allowed: list[str]) -> bool:
    """`host` is an allowed domain or a subdomain of one (both already without "www.")."""
    return any(host == d or host.endswith("." + d) for d in allowed)


def hyperlink_targets(path: Path) -> list[str]:
    """External relationship targets (hyperlinks) of an Office file; [] if it is not a zip."""
    targets: list[str] = []
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if not info.filename.endswith(".rels") or info.file_size > _RELS_BYTES:
                    continue
                xml = zf.read(info).decode("utf-8", errors="replace")
                for rel in _RELATIONSHIP.findall(xml):
                    target = _TARGET.search(rel)
                    if target and 'TargetMode="External"' in rel:
                        targets.append(html.unescape(target.group(1)))
    except (zipfile.BadZipFile, OSError):
        return []
    return targets


def verify_citation_domains(spec: CitationDomainsSpec, ctx: VerifierContext) -> VerifierResult:
    doc = ctx.document(spec.file)
    if isinstance(doc, str):
        return _res("unobservable", doc)
    texts = [doc.raw or doc.text]
    path = ctx.path(spec.file) if spec.file else None
    if path is not None and path.suffix.lower() in _OFFICE:
        texts.extend(hyperlink_targets(path))
    hosts = list(dict.fromkeys(h for text in texts for h in cited_hosts(text)))
    allowed = "; allowed: " + (", ".join(spec.allowed) if spec.allowed else "none (closed corpus)")
    if not hosts:
        if spec.require_citation:
            return _res("fail", f"no URL cited in {_where(spec)}, and a citation is required{allowed}")
        return _res("pass", f"no URL cited in {_where(spec)}")
    bad = [h for h in hosts if not host_allowed(h, spec.allowed)]
    if bad:
        return _res("fail", f"cited hosts outside the allowed domains: {', '.join(bad)} "
                    f"({len(bad)} of {len(hosts)} hosts cited in {_where(spec)}){allowed}")
    return _res("pass", f"all cited hosts on allowed domains: {', '.join(hosts)}")
