"""The documentation's generated parts, written by docs/hooks.py while MkDocs builds, from the code itself: the
configuration reference (reportgen.config's schema and defaults), the report.json reference (the report's
records), the Python API (docstrings), the command line (the typer app) and the gallery (the reports
docs/gallery.py built). Each module has one `render() -> str` of Markdown; a page asks for it with a line
`<!-- generated: NAME -->`.
"""

