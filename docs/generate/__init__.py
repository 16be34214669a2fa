"""The documentation's generated parts, written by docs/hooks.py while MkDocs builds, from the code itself: the
configuration reference (reportgen.config's schema and defaults), the report.json reference (the report's
records), the Python API (docstrings), the command line (the typer app) and the gallery (the reports
docs/gallery.py built). Each of those five modules has one `render() -> str` of Markdown, which a page asks for with
a line `<!-- generated: NAME -->` (docs/hooks.py's PAGES); markdown.py and source_notes.py are what they share.
"""

