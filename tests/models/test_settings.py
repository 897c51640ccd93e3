"""models/settings.py's refusal of settings a fixed request would not send (the managed File Search
baselines, the deep-research agents): it names each flag as the command line spells it."""

from __future__ import annotations

from types import SimpleNamespace

from deskbench.models.settings import Sampling, resolve, unsent_refusal


def _model(sampling: Sampling) -> SimpleNamespace:
    return SimpleNamespace(settings=resolve("google/gemini-2.5-flash", sampling))


def test_nothing_given_is_no_refusal() -> None:
    assert unsent_refusal(_model(Sampling()), "--agent x sends no {flags}") is None
    assert unsent_refusal(None, "--agent x sends no {flags}") is None  # no model: nothing to refuse


def test_each_given_setting_is_named_by_its_flag_and_the_fix_is_to_drop_them() -> None:
    refused = unsent_refusal(_model(Sampling(temperature=0.2, top_k=5)),
                             "--agent x sends the paper's request, with no {flags}")
    assert refused == ("--agent x sends the paper's request, with no --temperature, --sampling-top-k: "
                       "drop --temperature, --sampling-top-k")
