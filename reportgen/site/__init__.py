"""The site stage: the report and the view payloads in, a finished static site out (no torch).

Takes a `reportgen.report.Report` (typed plain data), the examples' `ExampleRun` records for the
views and an output directory; gives a site that works from `file://`. `writer` runs the stage:
`views` and `view_files` encode the attention views' data, `charts/` makes every chart (Vega-Lite
specs, their rows, the head map and the findings' pictures, drawn at build time), `pages` renders
the Jinja2 templates (every user string through `htmlsafe`), `glossary` and `term_links` link the
terms, `story` writes the findings page's first screen (model, patterns looked for, take-home),
`references` the references page, `token_text` how tokens are shown (␣ for a leading space), `previews` the
link previews, `exports` the downloads, `export_cache` keeps drawings between
builds, `mkdocs_site` runs MkDocs Material, and `output` decides which directory may be replaced and
swaps the new site in. Imports no model code and no analysis: only the report's plain data.
"""
