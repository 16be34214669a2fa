"""Issue 28, one convention for changes: the relative change first, the absolute change beside it; never "-0.0%"
or "-0.000"; a p-value printed beside a star is on the same side of alpha as the test that set the star."""

from __future__ import annotations

import pytest

from reportgen.findings.formatting import change, change_with_absolute, p_number, p_text, signed


@pytest.mark.parametrize(("value", "text"), [(-0.0004, "0.0%"), (0.0004, "0.0%"), (0.0, "0.0%"), (-0.0, "0.0%"),
                                             (-0.0131, "-1.3%"), (0.023, "+2.3%"), (None, "n/a")])
def test_a_relative_change_that_rounds_to_zero_has_no_sign(value, text):
    assert change(value) == text


@pytest.mark.parametrize(("value", "text"), [(-0.0004, "0.000"), (0.0004, "0.000"), (-0.0421, "-0.042"),
                                             (0.5, "+0.500")])
def test_an_absolute_change_that_rounds_to_zero_has_no_sign(value, text):
    assert signed(value) == text


def test_relative_change_first_and_the_absolute_change_beside_it():
    assert change_with_absolute(-0.0461, -0.0421, "Spearman") == "-4.6% (-0.042 Spearman)"
    assert change_with_absolute(-0.0461, None, "Spearman") == "-4.6%"
    assert change_with_absolute(-0.00001, -0.00001) == "0.0% (0.000)"


@pytest.mark.parametrize(("p", "alpha", "text"), [
    (0.0498, 0.05, "0.0498"),  # 2 digits would say 0.05, beside a star
    (0.05, 0.05, "0.05"),  # not below alpha: no star, and 0.05 says so
    (0.0501, 0.05, "0.05"),  # 0.05 is not below 0.05 either: 2 digits are enough
    (0.012, 0.05, "0.012"),
    (0.00996, 0.01, "0.00996"),
    (0.0498, None, "0.05"),
])
def test_a_p_value_stays_on_its_side_of_alpha(p, alpha, text):
    assert p_number(p, alpha) == text
    if alpha is not None:
        assert (float(text) < alpha) == (p < alpha)


def test_p_text_keeps_the_bound_and_passes_alpha_on():
    assert p_text(0.0498, 0.02, 999, 0.05) == "p = 0.0498"
    assert p_text(0.004, 0.001, 999, 0.05) == "p ≤ 0.004"  # the raw p-value at its floor 1 / 1000
    assert p_text(None, None, 999, 0.05) == "p undefined"
