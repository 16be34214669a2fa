"""The patching findings (reportgen.findings.patching) from records made here: which head each names, its verdict
from its interval and corrected test, the behaviour's own test first, and an encoder-decoder's heads by group."""

from __future__ import annotations

import pytest

from reportgen.findings.patching import patching_findings
from reportgen.report import Patching, PatchingAgreement, PatchingEffects, PatchingPairs


def _record(present: bool = True, significant: bool = True, example: int | None = 2) -> Patching:
    """2 layers x 2 heads: layer 1 head 0 restores 80% [70%, 90%] and, patched from the corrupted run, leaves 10%."""
    def effects(direction: str, values, low, high) -> PatchingEffects:
        return PatchingEffects(direction=direction, effect=values, low=low, high=high,
                               p_adjusted=[[1.0, 1.0], [0.004, 1.0]],
                               significant=[[False, False], [significant, False]], estimate=values)
    pairs = PatchingPairs(data="builtin", behaviour="induction", count=20, tokens=12, metric="logit difference",
                          clean=3.0, corrupted=0.5, clean_ci=[2.5, 3.5], corrupted_ci=[0.2, 0.8],
                          difference=2.5 if present else 0.01, difference_ci=[2.0, 3.0] if present else [-0.2, 0.3],
                          min_difference=0.5, present=present)
    return Patching(
        pairs=pairs, positions=[], exact_heads=None, runs=160, max_masks=20000, alpha=0.05, bootstrap_samples=100,
        permutations=100, example=example, seconds={"exact": 1.0, "attribution": 0.1},
        directions=[
            effects("denoising", [[0.0, 0.1], [0.8, 0.05]], [[-0.1, 0.0], [0.7, -0.1]], [[0.1, 0.2], [0.9, 0.2]]),
            effects("noising", [[1.0, 0.9], [0.1, 0.95]], [[0.9, 0.8], [0.0, 0.9]], [[1.1, 1.0], [0.2, 1.0]])],
        agreement=[PatchingAgreement(direction="denoising", spearman=0.9, overlap=3, top=4, disagree=[[0, 1]])])


def test_each_direction_names_its_largest_head_with_interval_test_and_verdict():
    denoising, noising, agreement = patching_findings(_record())
    assert denoising.id == "patching-denoising" and denoising.supported
    assert denoising.sentence.startswith("Patching layer 1 head 0 from the clean run into the corrupted one restores "
                                         "80% [70%, 90%] of the logit difference (corrected p = 0.004")
    assert denoising.sentence.endswith("— supported.") and denoising.ci == [0.7, 0.9]
    assert denoising.spans[1].link == "example-3.html#view=head&layer=1&head=0"  # the head's view on the prompt
    assert noising.numbers["head"] == 0 and "leaves 10% [0%, 20%]" in noising.sentence  # least left: most needed
    assert agreement.id == "patching-agreement" and "Spearman ρ = 0.90" in agreement.sentence
    assert "the tops differ on layer 0 head 1" in agreement.sentence


def test_a_head_whose_test_fails_is_not_supported():
    denoising = patching_findings(_record(significant=False))[0]
    assert not denoising.supported and denoising.sentence.endswith("— not supported.")
    assert "0 of 4 heads move it significantly" in denoising.sentence


def test_pairs_that_show_no_behaviour_name_no_head():
    (only,) = patching_findings(_record(present=False))
    assert only.id == "patching-absent" and not only.supported
    assert "0.01 [-0.20, 0.30]" in only.sentence and "does not clear 0.5 logits" in only.sentence
    assert "no head is named" in only.sentence


def test_without_the_prompts_example_a_head_links_to_the_chart():
    assert patching_findings(_record(example=None))[0].spans[1].link == "patching.html#patching-denoising"


@pytest.mark.parametrize(("groups", "name"), [(["encoder", "cross"], "cross-attention layer 0 head 0"),
                                              (["decoder", "decoder"], "decoder self-attention layer 1 head 0")])
def test_an_encoder_decoders_head_is_named_by_its_group(groups, name):
    denoising = patching_findings(_record(), groups)[0]
    assert f"Patching {name} from the clean run" in denoising.sentence
