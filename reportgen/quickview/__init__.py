"""Your own sentence, at once: the attention views of one input without a build (issue 29).

Takes one text (or a pair) and a model, as `reportgen view` and `reportgen.show` give them, or the
attention a user already has (per-layer [batch, heads, query, key] arrays and their tokens); gives an
`ExampleRun` of that input (`inputs`), and from it the views' payload, a single self-contained HTML
page or a notebook output (`reportgen.site.standalone`). One model load and one forward pass: no
ablation, no statistics, no MkDocs. The loaded model is kept for the next input of the same process.
"""

from reportgen.quickview.inputs import QuickRun, from_attentions, run_text
from reportgen.quickview.page import page_text, write_view

__all__ = ["QuickRun", "from_attentions", "page_text", "run_text", "write_view"]
