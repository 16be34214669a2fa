"""The kinds of model reportgen analyses, beside the stages: encoder, decoder, encoder-decoder.

Takes: a model directory (its config.json) or a report's `architecture`. Gives: the `ModelKind` that
answers for everything that differs between kinds (reportgen.kinds.base): which options and examples it
takes, how an example runs, which atlases and head groups it has, which ablation tasks it can run.
The pipeline decides the kind once (`kind_of`) and asks it; a new kind is a module here and a line in
KINDS. Imports no torch: each kind loads what it runs when it runs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from reportgen.kinds.base import Atlas, Labels, ModelKind
from reportgen.kinds.decoder import DecoderKind
from reportgen.kinds.encoder import EncoderKind
from reportgen.kinds.encoder_decoder import EncoderDecoderKind

# Asked in this order; the encoder, last, holds what the model stage's file policy admitted and no other holds.
KINDS: tuple[ModelKind, ...] = (EncoderDecoderKind(), DecoderKind(), EncoderKind())

__all__ = ["KINDS", "Atlas", "Labels", "ModelKind", "kind_for", "kind_of", "kind_named"]


def kind_for(config: Mapping) -> ModelKind:
    """The kind of a checkpoint whose config.json holds `config`."""
    return next(kind for kind in KINDS if kind.holds(config))


def kind_of(path: Path) -> ModelKind:
    """The kind of the model in the directory `path`, from its config.json alone (nothing is loaded)."""
    from reportgen.model.loading import read_config

    return kind_for(read_config(Path(path)))


def kind_named(name: str) -> ModelKind:
    """The kind a report names (`Report.architecture`)."""
    return next(kind for kind in KINDS if kind.name == name)
