"""An example's entropy map drawn at build time (reportgen.site.charts.value_map_svg, issue 47): each head a link
with its value in its title, darker for more, a legend from the lowest to the highest value, extremes named."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree

from reportgen.site.charts.value_map_svg import HIGH, LOW, NONE, colour, value_map

GRID = [[0.5, 1.5, None], [2.5, 1.0, 0.5]]


def _hex(rgb: tuple[int, int, int]) -> str:
    return "#" + "".join(f"{c:02x}" for c in rgb)


def test_the_scale_runs_light_to_dark_and_clamps():
    assert colour(0.0, 0.0, 1.0) == _hex(LOW) and colour(1.0, 0.0, 1.0) == _hex(HIGH)
    assert colour(-3.0, 0.0, 1.0) == _hex(LOW) and colour(9.0, 0.0, 1.0) == _hex(HIGH)
    assert colour(5.0, 5.0, 5.0) == _hex(LOW)  # one value only: no range to spread over
    middle = colour(0.5, 0.0, 1.0)
    channels = [int(middle[i:i + 2], 16) for i in (1, 3, 5)]
    assert all(min(a, b) <= c <= max(a, b) for c, a, b in zip(channels, LOW, HIGH, strict=True))


def test_each_head_is_a_link_with_its_value_and_the_extremes_are_named():
    svg = str(value_map(GRID, "Entropy <here>", "entropy (nats)", lambda layer, head: f"#l={layer}&h={head}", " nats"))
    root = ElementTree.fromstring(svg)
    ns = {"s": "http://www.w3.org/2000/svg"}
    links = root.findall("s:a", ns)
    assert [a.get("href") for a in links] == [f"#l={layer}&h={head}" for layer in range(2) for head in range(3)]
    titles = [a.find("s:title", ns).text for a in links]
    assert titles[0] == "Layer 0, head 0: 0.50 nats" and titles[2] == "Layer 0, head 2: no value"
    fills = [a.find("s:path", ns).get("fill") for a in links]
    assert fills[3] == _hex(HIGH) and fills[0] == fills[5] == _hex(LOW) and fills[2] == NONE
    label = root.get("aria-label")
    assert label.startswith("Entropy <here>: a heatmap of entropy (nats) for 2 layers x 3 heads")
    assert "highest 2.50 at layer 1 head 0, lowest 0.50 at layer 0 head 0" in label
    assert "Entropy &lt;here&gt;" in svg  # text is escaped
    assert re.findall(r">(\d\.\d\d)</text>", svg) == ["0.50", "2.50"]  # the legend's ends
    assert "rg-head-map-svg" in root.get("class")  # one Tab stop and the readout line, as the head map
