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
    """An absolute change of a metric, 3 decimals with its sign; a change that rounds to zero is "0.000",
    never "-0.000" (a sign the rounding cannot back)."""
    text = f"{x:+.3f}"
    return "0.000" if not text.strip("+-0.") else text


def change(x: float | None) -> str:
    """A relative change, e.g. -1.3%; one that rounds to zero is "0.0%", never "-0.0%" or "+0.0%"."""
    if x is None:
        return "n/a"
    text = f"{100 * x:+.1f}%"
    return "0.0%" if not text.strip("+-0.%") else text


def change_with_absolute(relative: float | None, absolute: float | None, metric: str = "") -> str:
    """The site's one way to write a change of a metric (issue 28): the relative change first, the absolute
    change beside it, e.g. "-1.3% (-0.012 Spearman)"; only the relative one when the absolute is unknown."""
    if absolute is None:
        return change(relative)
    unit = f" {metric}" if metric else ""
    return f"{change(relative)} ({signed(absolute)}{unit})"


def interval(ci: list[float | None]) -> str:
    """A CI of a relative change, e.g. [-2.1%, +0.4%]."""
    return f"[{change(ci[0])}, {change(ci[1])}]"


def fractions_list(fractions: list[float]) -> str:
    """10%, 20% and 30%."""
    return words_list([percent(f) for f in fractions])


def words_list(words: list[str]) -> str:
    """"a", "a and b", "a, b and c"."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def p_text(adjusted: float | None, raw: float | None, permutations: int, alpha: float | None = None) -> str:
    """A permutation p-value (corrected or not), written as a bound when the raw p-value sits at its
    floor 1 / (permutations + 1): the test cannot say how much smaller it is.

    With the test's `alpha`, the value gets as many digits as it needs to stay on its side of alpha:
    0.0498 is "0.0498", not "0.05", which would read as not significant beside a star (p < alpha)."""
    if adjusted is None:
        return "p undefined"
    bound = raw is not None and permutations > 0 and raw <= (1 + 1e-9) / (permutations + 1)
    return f"p {'≤' if bound else '='} {p_number(adjusted, alpha)}"


def p_number(p: float, alpha: float | None = None) -> str:
    """A p-value, 2 significant digits, more (up to 4) where 2 would put it on the other side of alpha."""
    for digits in (2, 3, 4):
        text = f"{p:.{digits}g}"
        if alpha is None or (float(text) < alpha) == (p < alpha):
            return text
    return text



def duration(seconds: float) -> str:
    """A time left as a reader takes it in: "40 s", "3 min", "1 h 5 min" (rounded to what matters)."""
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"
