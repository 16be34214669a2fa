"""Charts drawn into a page at build time: a Vega-Lite spec as an <svg> element inside the HTML.

A picture inlined this way needs no script, prints, and works with JavaScript off (issue 15, the
pictures beside the findings). vl-convert draws it; what follows makes it fit for a page: smaller,
with ids of its own, and labelled for screen readers.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree

from markupsafe import Markup

from reportgen.site.export_cache import NO_CACHE, ExportCache, drawn

# A picture inlined in a page (reportgen.site.charts.finding_pictures): what Vega writes for interaction and for a
# standalone file, which a static picture in a page does not need; the attributes that hold coordinates,
# written to 0.1 px (invisible at any zoom); and the presentation attributes that SVG inherits, so that
# one on a group says what every child said (SVG 1.1, "Property inheritance"). Together they halve the default
# site's ten pictures (110 KB as vl-convert writes them, 56 KB inline).
_INTERACTIVE = ("class", "role", "pointer-events", "aria-hidden", "aria-roledescription", "aria-label", "version")
_COORDINATES = ("d", "transform", "x", "y", "x1", "x2", "y1", "y2", "width", "height")
_INHERITED = ("fill", "stroke", "stroke-width", "stroke-miterlimit", "font-family", "font-size", "font-weight",
              "text-anchor")
_NOTHING_DRAWN = ("", "M0,0h0v0h0Z")  # the path data of Vega's empty background and foreground paths
_DECIMAL = re.compile(r"-?\d+\.\d+")
_RGB = re.compile(r"rgb\((\d+), ?(\d+), ?(\d+)\)")
_URL_REFERENCE = re.compile(r"url\(#([^)]+)\)")


def svg(spec: dict, prefix: str, label: str, cache: ExportCache = NO_CACHE) -> Markup:
    """The chart as an <svg> element to put inside a page: no XML prolog or namespace declarations (an
    HTML parser gives <svg> its namespace), `role="img"` with `label` as its accessible name, every id
    (clip paths, legend gradients) renamed `<prefix>-<n>` with its references, so that several pictures
    on one page never share one; viewBox, width and height kept, so CSS can scale it.

    Text stays text in the generic sans-serif family: the page loads no font for it. `cache` keeps the
    finished element by its inputs, so a rebuild draws only the pictures that changed."""
    inputs = ["inline-svg", spec, prefix, label]
    return Markup(cache.get_text(inputs, "svg", lambda: drawn(inputs, lambda: _drawn(spec, prefix, label))))


def _drawn(spec: dict, prefix: str, label: str) -> str:
    import vl_convert

    root = ElementTree.fromstring(vl_convert.vegalite_to_svg({**spec, "config": {**spec.get("config", {}),
                                                                                 "aria": False}}))
    _prune(root)
    for element in root.iter():
        element.tag = element.tag.rpartition("}")[2]
        element.attrib = {name.rpartition("}")[2]: _compact(name, value) for name, value in element.attrib.items()
                          if name not in _INTERACTIVE and (name, value) not in (("opacity", "1"),
                                                                               ("transform", "translate(0,0)"))}
    for group in reversed(list(root.iter("g"))):  # children before their parents
        _hoist(group)
    _rename_ids(root, prefix)
    root.attrib = {"viewBox": root.get("viewBox"), "width": root.get("width"), "height": root.get("height"),
                   "role": "img", "aria-label": label, "class": "rg-picture"}
    return ElementTree.tostring(root, encoding="unicode")


def _prune(parent: ElementTree.Element) -> None:
    """Removes what draws nothing: hidden and empty paths, then groups left without children."""
    for child in list(parent):
        _prune(child)
        tag = child.tag.rpartition("}")[2]
        if (child.get("display") == "none" or (tag == "path" and child.get("d") in _NOTHING_DRAWN)
                or (tag == "g" and len(child) == 0)):
            parent.remove(child)


def _compact(name: str, value: str) -> str:
    """Coordinates to 0.1 px and rgb() colours as #rrggbb; any other value as it is."""
    if name in _COORDINATES:
        value = _DECIMAL.sub(_tenth, value)
    return _RGB.sub(lambda m: "#" + "".join(f"{int(part):02x}" for part in m.groups()), value)


def _tenth(match: re.Match) -> str:
    text = f"{float(match.group()):.1f}".removesuffix(".0")
    return "0" if text == "-0" else text


def _hoist(group: ElementTree.Element) -> None:
    """An inherited attribute that every child of `group` sets to one value is set once, on the group."""
    children = list(group)
    if len(children) < 2:
        return
    for name in _INHERITED:
        values = {child.get(name) for child in children}
        if len(values) == 1 and None not in values:
            group.set(name, values.pop())
            for child in children:
                del child.attrib[name]


def _rename_ids(root: ElementTree.Element, prefix: str) -> None:
    """Every id becomes `<prefix>-<n>`, numbered in document order, with each url(#id) and href="#id" naming it."""
    names = {element.get("id"): f"{prefix}-{number}"
             for number, element in enumerate((e for e in root.iter() if e.get("id")), 1)}
    for element in root.iter():
        for name, value in list(element.attrib.items()):
            if name == "id":
                element.set(name, names[value])
            elif name == "href" and value.startswith("#"):
                element.set(name, "#" + names.get(value[1:], value[1:]))
            else:
                element.set(name, _URL_REFERENCE.sub(lambda m: f"url(#{names.get(m.group(1), m.group(1))})", value))
