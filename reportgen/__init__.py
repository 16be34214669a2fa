"""reportgen: a static website of findings about the attention heads of a BERT-family model.

The Python API, loaded on first use so that `import reportgen` (and the command line) stays fast:

- `reportgen.build(config=..., out=...)`: what `reportgen build` does; returns the typed report.
- `reportgen.Report.load("site/report.json")`: a published report read back into its records.
- `reportgen.show(text, pair=None, model=None, view="head")`: the attention views of one input in a
  notebook (also `head_view`, `model_view`, `qk_view`), or of attention a user already has.
- `reportgen.view_html(text, ...)`: the same views as one self-contained HTML file's text.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# name -> the module that defines it
_API = {
    "build": "reportgen.api",
    "Report": "reportgen.report",
    "show": "reportgen.notebook",
    "head_view": "reportgen.notebook",
    "model_view": "reportgen.notebook",
    "qk_view": "reportgen.notebook",
    "view_html": "reportgen.notebook",
}
__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name not in _API:
        raise AttributeError(f"module 'reportgen' has no attribute {name!r}")
    return getattr(importlib.import_module(_API[name]), name)
