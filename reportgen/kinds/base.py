"""What a kind of model is asked, once its kind is known: the interface each kind implements.

A kind (encoder, decoder, encoder-decoder) answers for everything that differs between them: which
checkpoints it holds, which config options and examples it takes, how an example is run, which
attention atlases it measures, how its heads are grouped and which ablation tasks it can run. The
pipeline holds one kind per model and asks it; it never branches on which kind it holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from reportgen.errors import ModelError
from reportgen.model.loading import SUPPORTED_ENCODER_DECODERS
from reportgen.progress import Callback

if TYPE_CHECKING:
    from reportgen.config import Config, ExampleSpec, PatternSettings
    from reportgen.report import CrossStatistics, DecoderStatistics, PatternStatistics
    from reportgen.runs import ExampleRun


# What the ablation tasks that need one kind say to a model of another (ModelKind.task_refusal).
CAUSAL_NEEDS = ("task 'causal_lm' predicts each token from the ones before it and needs a decoder (causal LM); "
                "for a masked-LM encoder use task 'mlm'")
SEQ2SEQ_NEEDS = ("task 'seq2seq' scores a target given its source and needs an encoder-decoder "
                 f"({', '.join(SUPPORTED_ENCODER_DECODERS.values())})")


class Stage(Protocol):
    """What a kind reads of the pipeline's model stage (reportgen.pipeline.model_stage.ModelStage)."""

    runs: list[ExampleRun]
    fingerprint: str  # the model files' hash, part of every cache key
    max_length: int
    warnings: list[str]

    def load(self) -> tuple[Any, Any]:
        """(model, tokenizer), loaded on first use."""


@dataclass
class Atlas:
    """A model's pattern statistics: `main` (the encoder atlas, or a decoder's own), and for an
    encoder-decoder the atlas of its decoder self-attention and its cross-attention statistics."""

    main: PatternStatistics | DecoderStatistics
    decoder: DecoderStatistics | None = None
    cross: CrossStatistics | None = None


@dataclass
class Labels:
    """One example's heads as its page describes them: the seed patterns found, each head's label and
    the heads' mean attention entropy (each beside its kind's uniform null)."""

    patterns: list
    labels: Any
    entropy: Any


class ModelKind:
    """One kind of model. Subclasses set the class attributes and override what their kind does differently;
    the defaults are what most kinds do (no extra refusal, every example taken as it is)."""

    name: str  # the report's `architecture`
    article: str  # "an encoder", in the sentences that refuse an option for this kind
    tasks: frozenset[str]  # the ablation tasks (config `ablation.task`) this kind can run
    grouped: bool = False  # heads in named groups (an encoder-decoder's three): the ablation's record says so
    reads_target: bool = False  # each example is a source and a `target` its decoder reads
    pair_needs_separator: bool = False  # a pair reaches the model only joined by its tokenizer's separator token
    reads_last_token: bool = False  # a sequence classifier of this kind reads each text's last token
    # Activation patching (reportgen.patching): the ablation task whose model class holds the LM head the metric reads,
    # whether the prompts hold a [MASK] the metric is read at, and whether the built-in induction pairs fit this kind.
    lm_task: str = "mlm"
    masked_prompts: bool = False
    builtin_pairs: bool = False
    metric_at: str = "the [MASK]"  # where the metric is read, as the page says it

    def holds(self, config: Mapping) -> bool:
        """Whether a checkpoint whose config.json is `config` is of this kind (the registry asks each in turn)."""
        raise NotImplementedError

    # -- before any work ------------------------------------------------------------------------------
    def check_settings(self, config: Config, compared: bool) -> None:
        """Refuse, before the model loads, a config option this kind cannot honour (`compared`: this model is
        the comparison model of another build)."""

    def examples(self, specs: list[ExampleSpec], config: Config) -> tuple[list[ExampleSpec], list[str]]:  # noqa: ARG002 (the interface)
        """The examples this kind reads, and a note for each group left out (raises DataError for a wrong one)."""
        return specs, []

    def check_task(self, task: str, model_dir: Path, model_type: Any) -> None:
        """Refuse an ablation task this kind cannot run, from config.json alone (before anything loads)."""
        if task not in self.tasks:
            raise ModelError(f"model directory {model_dir}: model type '{model_type}' is "
                             f"{self.task_refusal(task)}")

    def patching_refusal(self, data: str) -> str | None:
        """Why activation patching on `data` ("builtin" or a file) cannot run on this kind, None when it can."""
        if data == "builtin" and not self.builtin_pairs:
            return (f"the built-in induction pairs are for decoders; {self.article} needs a JSONL file of prompt "
                    "pairs {clean, corrupted, answer, wrong}")
        return None

    def task_refusal(self, task: str) -> str:
        """Why `task` is refused for this kind, after "model type 'x' is ..."."""
        raise NotImplementedError

    # -- the model run --------------------------------------------------------------------------------
    def check_inputs(self, tokenizer, specs: list[ExampleSpec], source: str) -> None:
        """Refuse, once the tokenizer is loaded, an example it cannot read as this kind needs."""

    def run(self, net, tokenizer, spec: ExampleSpec, max_length: int) -> ExampleRun:
        """One example's attention (and what its views need) from the loaded model."""
        raise NotImplementedError

    # -- the analyses ---------------------------------------------------------------------------------
    def atlas(self, config: Config, stage: Stage, progress: Callback) -> Atlas:
        """The pattern statistics of this kind over the build's examples (and corpus), `stage` being the
        pipeline's model stage (its runs, cache key and lazily loaded model)."""
        raise NotImplementedError

    def groups(self, run: ExampleRun) -> list[str] | None:  # noqa: ARG002 (the interface)
        """The group of each flat attention layer, for a kind whose heads are in groups; else None."""
        return None

    def labels(self, run: ExampleRun, settings: PatternSettings | None) -> Labels:
        """The example's heads as its page names them (computed here so that the site only renders)."""
        raise NotImplementedError


def refuse_targets(specs: list[ExampleSpec], source: str) -> None:
    """A `target` is for an encoder-decoder's decoder: a kind that reads none would silently ignore it."""
    from reportgen.errors import DataError

    for spec in specs:
        if spec.target is not None:
            raise DataError(f"{source}: field 'examples': the example {spec.name or spec.text[:40]!r} has a "
                            "'target', which only an encoder-decoder (BART, T5, Marian) reads; remove it")


def refuse_encoder_options(config: Config, compared: bool, article: str) -> None:
    """What only an encoder's build does yet, refused for another kind before any work: a comparison (its
    pages are an encoder's) and seed 004's claims (about a BERT-style encoder's heads)."""
    from reportgen.errors import ConfigError

    if compared or config.compare is not None:
        raise ConfigError(f"{config.source}: field 'compare': comparing models is for encoders; "
                          f"{article}'s build has no comparison yet (remove 'compare')")
    if config.claims is not None:
        raise ConfigError(f"{config.source}: field 'claims': seed 004's claims are about an encoder's heads; "
                          f"remove 'claims' for {article}")
