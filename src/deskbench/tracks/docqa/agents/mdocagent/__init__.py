"""The other systems of MADQA's Table 3, run as the repository it follows runs them (Han et al.
2025, github aiming-lab/MDocAgent): `m3docrag` (page images by ColPali, to an MLLM),
`colbert-llm` (page texts by ColBERTv2, to an LLM) and `mdocagent` (both retrievals, then the
General, Critical, Text, Image and Summarising agents). pipeline.py says what they share and
where each choice comes from; prompts.py holds MDocAgent's prompts verbatim."""

from collections.abc import Sequence

from deskbench.errors import UserError
from deskbench.tracks.docqa.agents.mdocagent.colbert_llm import ColbertLlmAgent
from deskbench.tracks.docqa.agents.mdocagent.m3docrag import M3DocRagAgent
from deskbench.tracks.docqa.agents.mdocagent.mdocagent import MDocAgent
from deskbench.tracks.docqa.agents.mdocagent.pipeline import PipelineAgent, retriever_options

PIPELINES: dict[str, type[PipelineAgent]] = {a.name: a for a in (M3DocRagAgent, ColbertLlmAgent, MDocAgent)}
"""The pipeline agents by name, with the retrievers they open (tracks/docqa/run.py reads it)."""



def pipeline_options(agents: Sequence[str], text: str | None, image: str | None) -> dict[str, str]:
    """`deskbench run`'s --text-retriever / --image-retriever as the agent options of a pipeline
    agent, the paper's retrievers where not given (so the run's configuration names them); for
    any other agent these flags are refused."""
    name = agents[0] if agents else ""
    if name in PIPELINES:
        return retriever_options(name, PIPELINES[name].modalities, {"text": text, "image": image})
    for flag, value in (("--text-retriever", text), ("--image-retriever", image)):
        if value is not None:
            raise UserError(f"{flag}: --agent {name or 'bm25-agent'} has no retrievers of its own; its search takes "
                            f"--retriever (only {', '.join(PIPELINES)} take {flag})")
    return {}


__all__ = ["PIPELINES", "pipeline_options", "ColbertLlmAgent", "M3DocRagAgent", "MDocAgent", "PipelineAgent", "retriever_options"]
