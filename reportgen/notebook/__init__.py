"""The attention views in a notebook and from Python (issue 29), named like bertviz's functions.

Takes a text (or a pair) and a model, or the attention a user already has with its tokens; gives an
object that Jupyter displays inline (its `_repr_html_`: the view with its scripts and style inside,
reportgen.site.standalone.fragment_html, so it works offline, with no require.js, several to a page and
in a notebook exported to HTML), or the text of a single-file page (`view_html`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from reportgen.errors import DataError
from reportgen.quickview import QuickRun, from_attentions, page_text, run_text

__all__ = ["View", "head_view", "model_view", "qk_view", "show", "view_html"]


class View:
    """One view of one input, shown by Jupyter (or any front end that renders text/html)."""

    def __init__(self, quick: QuickRun, view: str):
        """Checks here, where the view is asked for, what it can show: a view that cannot be drawn is refused by
        the call that asks for it, not later when the notebook displays it."""
        from reportgen.site.standalone import VIEWS
        from reportgen.site.views import has_qk

        if view not in VIEWS:
            raise DataError(f"view: {view!r} is not one of {', '.join(VIEWS)}")
        if view == "qk" and quick.pair_run is not None:
            raise DataError("view 'qk': the query/key view is not built for encoder-decoders; use view='head' "
                            "or 'model'")
        if view == "qk" and not has_qk(quick.run):
            raise DataError("view 'qk': this input has no query/key vectors (attention given without a model, "
                            "or more tokens than the query/key view takes); use view='head' or 'model'")
        self.quick, self.view = quick, view

    def _repr_html_(self) -> str:
        from reportgen.quickview.page import view_payload
        from reportgen.site.standalone import fragment_html
        from reportgen.site.views import combined_payload, example_payload

        if self.quick.pair_run is not None:  # an encoder-decoder: its groups, contributions as value norms
            return fragment_html(view_payload(self.quick), self.view)
        run = self.quick.run
        return fragment_html(combined_payload(run) if self.view == "qk" else example_payload(run), self.view)

    def __repr__(self) -> str:
        run = self.quick.run
        return f"<reportgen {self.view} view: {run.n_tokens} tokens, {run.attention.shape[0]} layers>"


def _quick(text: str | None, pair: str | None, model: str | None, config: str | Path | None,
           attentions: Sequence[Any] | None, tokens: Sequence[str] | None,
           sentence_b_start: int | None, target: str | None = None) -> QuickRun:
    if attentions is not None:
        if text is not None or pair is not None or model is not None or target is not None:
            raise DataError("give either a text (and a model) or attentions and tokens, not both")
        return QuickRun(from_attentions(attentions, tokens or [], sentence_b_start), "")
    if text is None:
        raise DataError("text: give a sentence to run the model on, or attentions= and tokens=")
    return run_text(text, pair, model, config, target=target)


def show(text: str | None = None, pair: str | None = None, model: str | None = None, view: str = "head", *,
         config: str | Path | None = None, attentions: Sequence[Any] | None = None,
         tokens: Sequence[str] | None = None, sentence_b_start: int | None = None,
         target: str | None = None) -> View:
    """The `view` ("head", "model" or "qk") of `text` (and `pair`) under `model` (default: the config's,
    else the embedded all-MiniLM-L6-v2), or of `attentions` (per layer [batch, heads, query, key], e.g. a
    transformers model's `outputs.attentions`) over `tokens`. For an encoder-decoder (BART, T5, Marian)
    `text` is the source and `target` what its decoder reads; its views switch between encoder, decoder and
    cross-attention. A notebook shows the returned object inline."""
    return View(_quick(text, pair, model, config, attentions, tokens, sentence_b_start, target), view)


def head_view(attentions: Sequence[Any] | None = None, tokens: Sequence[str] | None = None,
              sentence_b_start: int | None = None, **inputs) -> View:
    """bertviz's `head_view(attention, tokens, sentence_b_start)`; or `head_view(text=..., model=...)`."""
    return show(attentions=attentions, tokens=tokens, sentence_b_start=sentence_b_start, view="head", **inputs)


def model_view(attentions: Sequence[Any] | None = None, tokens: Sequence[str] | None = None,
               sentence_b_start: int | None = None, **inputs) -> View:
    """bertviz's `model_view(attention, tokens, sentence_b_start)`; or `model_view(text=..., model=...)`."""
    return show(attentions=attentions, tokens=tokens, sentence_b_start=sentence_b_start, view="model", **inputs)


def qk_view(text: str, pair: str | None = None, model: str | None = None, **inputs) -> View:
    """The query/key view of `text` (needs a model run: the vectors are not in `outputs.attentions`)."""
    return show(text, pair, model, view="qk", **inputs)


def view_html(text: str | None = None, pair: str | None = None, model: str | None = None, *,
              config: str | Path | None = None, attentions: Sequence[Any] | None = None,
              tokens: Sequence[str] | None = None, sentence_b_start: int | None = None,
              target: str | None = None) -> str:
    """The text of the single-file page `reportgen view` writes: every view of one input, all inline."""
    return page_text(_quick(text, pair, model, config, attentions, tokens, sentence_b_start, target))
