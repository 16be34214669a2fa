"""Encoder-decoders (BART, T5, Marian): each example a source and a target read with teacher forcing, three
groups of heads (the encoder's self-attention, the decoder's, the cross-attention), an atlas for each and
tasks seq2seq and classification."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from reportgen.config import Config, builtin_examples
from reportgen.errors import ConfigError, DataError
from reportgen.kinds.base import CAUSAL_NEEDS, Atlas, Labels, ModelKind, Stage, refuse_encoder_options
from reportgen.kinds.encoder import EncoderKind, encoder_statistics
from reportgen.model.loading import encoder_decoder_config
from reportgen.progress import Callback
from reportgen.runs import ExampleRun

SEQ2SEQ_INDUCTION = ("the induction test (Olsson et al. 2022) feeds a decoder-only model repeated random tokens; an "
                     "encoder-decoder's decoder also reads a source, which the test does not define")


class EncoderDecoderKind(ModelKind):
    name = "encoder-decoder"
    article = "an encoder-decoder"
    tasks = frozenset({"classification", "seq2seq"})
    grouped = True
    reads_target = True
    lm_task = "seq2seq"  # patching reads the decoder's next-token logits after a pair's `target`
    metric_at = "the decoder's last token (after the row's target)"

    def holds(self, config: Mapping) -> bool:
        return encoder_decoder_config(config)

    def task_refusal(self, task: str) -> str:
        if task == "causal_lm":
            return f"an encoder-decoder; {CAUSAL_NEEDS}"
        return (f"an encoder-decoder; task '{task}' reads a single stack of an encoder, so for an encoder-decoder "
                "use task 'seq2seq' (a target's loss given its source) or 'classification'")

    def check_settings(self, config: Config, compared: bool) -> None:
        """An encoder's options, and corpus statistics: a corpus line has no target for the decoder."""
        refuse_encoder_options(config, compared, self.article)
        if config.patterns.corpus:
            raise ConfigError(f"{config.source}: field 'patterns.corpus': an encoder-decoder's statistics are over "
                              "its examples (each a source and a target); remove 'corpus'")

    def examples(self, specs: list, config: Config) -> tuple[list, list[str]]:
        """Each a source (`text`) and a `target`: the built-in examples, which have no target, are left out
        with a note; an example of the user's without a target, or with a pair, is refused."""
        builtin = builtin_examples()
        kept = [spec for spec in specs if spec not in builtin]
        for spec in kept:
            label = repr(spec.name or spec.text[:40])
            if spec.pair is not None:
                raise DataError(f"{config.source}: field 'examples': the example {label} has a 'pair'; an "
                                "encoder-decoder reads a source ('text') and a 'target', not a pair")
            if spec.target is None:
                raise DataError(f"{config.source}: field 'examples': the example {label} has no 'target'; an "
                                "encoder-decoder reads a source ('text') and a 'target' for its decoder")
        if not kept:
            raise DataError(f"{config.source}: field 'examples': an encoder-decoder reads a source and a target, "
                            "and the built-in examples have no target; give examples with 'text' and 'target'")
        dropped = len(specs) - len(kept)
        notes = [f"{dropped} built-in example{'s' * (dropped > 1)} without a target left out: an encoder-decoder "
                 "reads a source and a target"] if dropped else []
        return kept, notes

    def run(self, net, tokenizer, spec, max_length: int) -> ExampleRun:
        """The whole (source, target) run; the run's own fields are the encoder's (no query/key view yet)."""
        from reportgen.model.seq2seq import run_source_target

        return run_source_target(net, tokenizer, spec, max_length)

    def atlas(self, config: Config, stage: Stage, progress: Callback) -> Atlas:
        return Atlas(encoder_statistics(config, stage, progress), decoder_group_statistics(config, stage),
                     cross_statistics(config, stage))

    def groups(self, run: ExampleRun) -> list[str]:
        """The group of each flat attention layer, in the order of its heads' masks
        (reportgen.model.head_sites): the encoder's self-attention, the decoder's, then the cross-attention."""
        encoder, decoder = len(run.seq2seq.encoder_attention), len(run.seq2seq.decoder_attention)
        return ["encoder"] * encoder + ["decoder"] * decoder + ["cross"] * decoder

    def labels(self, run: ExampleRun, settings) -> Labels:
        """The encoder's seed patterns and labels: the example page's first group is the encoder's."""
        return EncoderKind().labels(run, settings)


def decoder_group_statistics(config: Config, stage: Stage):
    """The decoder atlas over the decoder self-attention on the examples' decoder inputs (the start token,
    then the target shifted right): causal heads, so each statistic keeps its uniform causal null. From the
    runs alone, so not cached; induction is not measured (SEQ2SEQ_INDUCTION)."""
    from reportgen.patterns.decoder_atlas import decoder_atlas
    from reportgen.report import DecoderStatistics

    runs = [decoder_side(run) for run in stage.runs]
    return DecoderStatistics.model_validate({**decoder_atlas(runs, None, None, config.patterns),
                                             "induction_missing": SEQ2SEQ_INDUCTION})


def cross_statistics(config: Config, stage: Stage):
    """The cross-attention heads over the examples (reportgen.patterns.cross), each beside a uniform head over
    the source; a head parks its attention on the source's special tokens above the delimiter threshold
    (config `patterns.thresholds.delimiter`, Clark et al.'s test for [SEP])."""
    from reportgen.patterns.cross import cross_atlas
    from reportgen.report import CrossStatistics

    return CrossStatistics.model_validate(cross_atlas([run.seq2seq.cross_attention for run in stage.runs],
                                                      [run.special for run in stage.runs],
                                                      config.patterns.thresholds.delimiter, config.patterns.top_k))


def decoder_side(run: ExampleRun) -> ExampleRun:
    """An example's decoder self-attention as a run of its own: the decoder's input tokens (each its own
    word), their causal attention and value norms."""
    pair = run.seq2seq
    special = (np.asarray(pair.target_special, dtype=bool) if pair.target_special is not None
               else np.zeros(len(pair.target_tokens), dtype=bool))
    return ExampleRun(run.spec, list(pair.target_tokens), np.where(special, -1, np.arange(len(special))),
                      np.where(special, -1, 0), special, pair.decoder_attention, pair.target_truncated,
                      value_norms=(pair.value_norms or {}).get("decoder"))
