"""Charts: report numbers in, Vega-Lite specs and drawings out.

`vegalite` builds the specs with Altair (plain lists in, plain dicts out), `chartdata` says which numbers go
into which chart and where a cell links to, `head_map` and `head_map_svg` make the head map's cells and draw
them, `value_map_svg` an example's entropy map in the same drawing, `finding_pictures` the small picture beside
a finding, `inline_svg` draws a spec as an <svg> at build time and `png_palette` re-encodes a drawing's PNG in
fewer bytes.
"""
