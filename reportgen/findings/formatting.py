"""How numbers are written on every page and in every finding: one rounding for the whole site.

Shares of attention 2 decimals, metric values and changes 3, relative changes 1 decimal of a
percent, fractions of heads whole percents, p-values 2 significant digits (as a bound when a
permutation p-value sits at its floor). Plain functions of numbers, used by the findings and
the page templates alike.
"""

from __future__ import annotations


def share(value: float | None, digits: int = 2) -> str:
    """A share of attention (or a pattern score), 2 decimals; a dash for a value that was not
    measured (null in report.json); never "-0.00"."""
    if value is None:
        return "\u2013"
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text


def percent(x: float) -> str:
    return f"{100 * x:.0f}%"


def margin(x: float) -> str:
    """A configured share such as the non-inferiority margin, as exact as it was set: 1%, 0.5%."""
    return f"{100 * x:g}%"


def metric_value(x: float) -> str:
    return f"{x:.3f}"


def signed(x: float) -> str:
    return f"{x:+.3f}"


def change(x: float | None) -> str:
    """A relative change, e.g. -1.3%."""
    return "n/a" if x is None else f"{100 * x:+.1f}%"


def interval(ci: list[float | None]) -> str:
    """A CI of a relative change, e.g. [-2.1%, +0.4%]."""
    return f"[{change(ci[0])}, {change(ci[1])}]"


def fractions_list(fractions: list[float]) -> str:
    """10%, 20% and 30%."""
    names = [percent(f) for f in fractions]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def p_text(adjusted: float | None, raw: float | None, permutations: int) -> str:
    """A permutation p-value (corrected or not), written as a bound when the raw p-value sits at its
    floor 1 / (permutations + 1): the test cannot say how much smaller it is."""
    if adjusted is None:
        return "p undefined"
    bound = raw is not None and permutations > 0 and raw <= (1 + 1e-9) / (permutations + 1)
    return f"p {'≤' if bound else '='} {adjusted:.2g}"
