"""Decoders (GPT-2 and the Llama family): causal self-attention, one text per example, the decoder atlas
(previous-token, duplicate-token, induction, sink; each beside the uniform causal head) and task causal_lm."""

from __future__ import annotations

import warnings
from collections.abc import Mapping

from reportgen.cache.store import Cache, key_of
from reportgen.config import Config, builtin_examples
from reportgen.datafiles import file_sha256
from reportgen.errors import DataError
from reportgen.kinds.base import SEQ2SEQ_NEEDS, Atlas, Labels, ModelKind, Stage, refuse_encoder_options, refuse_targets
from reportgen.model.loading import VIEWABLE_DECODERS
from reportgen.progress import Callback

PATTERNS_VERSION = 2  # part of the decoder atlas's cache key: bump when it measures more (2: bos_delimiter)
INDUCTION_SEED = 0  # the induction test's random tokens (reportgen.model.induction)


class DecoderKind(ModelKind):
    name = "decoder"
    article = "a decoder"
    tasks = frozenset({"similarity", "classification", "mlm", "causal_lm"})
    lm_task = "causal_lm"
    metric_at = "the last token"
    builtin_pairs = True  # repeated random tokens: the induction behaviour, on any decoder
    pair_needs_separator = True
    reads_last_token = True

    def holds(self, config: Mapping) -> bool:
        return config.get("model_type") in VIEWABLE_DECODERS

    def task_refusal(self, task: str) -> str:  # noqa: ARG002 (seq2seq, its one refused task)
        return f"a decoder (causal LM); for a decoder use task 'causal_lm'; {SEQ2SEQ_NEEDS}"

    def check_settings(self, config: Config, compared: bool) -> None:
        refuse_encoder_options(config, compared, self.article)

    def examples(self, specs: list, config: Config) -> tuple[list, list[str]]:
        """The built-in examples with a second sentence are left out (a decoder reads one text; a pair would
        need a separator most decoder tokenizers lack), with a note saying so; a `target` is refused (a decoder
        reads none: it was built without an error and ignored before)."""
        refuse_targets(specs, config.source)
        builtin = builtin_examples()
        kept = [spec for spec in specs if spec.pair is None or spec not in builtin]
        dropped = len(specs) - len(kept)
        if not kept:
            raise DataError(f"{config.source}: field 'examples': a decoder reads one text per example and every "
                            "example is a built-in pair; give examples of your own")
        notes = [f"{dropped} built-in example{'s' * (dropped > 1)} with a second sentence left out: a decoder reads "
                 "one text"] if dropped else []
        return kept, notes

    def check_inputs(self, tokenizer, specs: list, source: str) -> None:
        """A pair reaches a decoder only joined as its tokenizer joins two texts, which needs a separator."""
        if tokenizer.sep_token is not None:
            return
        for spec in specs:
            if spec.pair is not None:
                raise DataError(f"{source}: field 'examples': the example {spec.name or spec.text[:40]!r} has a "
                                "'pair', and this decoder's tokenizer has no separator token to join the two; "
                                "give one text")

    def run(self, net, tokenizer, spec, max_length: int):
        from reportgen.model.run import run_example

        return run_example(net, tokenizer, spec, max_length, keep_qk=True)

    def atlas(self, config: Config, stage: Stage, progress: Callback) -> Atlas:
        return Atlas(decoder_statistics(config, stage, progress))

    def labels(self, run, settings) -> Labels:
        """The heads' decoder labels; no seed patterns (they are an encoder's)."""
        from reportgen.patterns.decoder import causal_entropy
        from reportgen.patterns.decoder_atlas import example_labels

        return Labels([], example_labels(run, settings), causal_entropy(run.attention))


def decoder_statistics(config: Config, stage: Stage, progress: Callback):
    """The decoder atlas over the examples, the corpus and the induction test, cached as a whole (the
    induction test's model run with it)."""
    from reportgen.model.induction import INDUCTION_BATCH, INDUCTION_N
    from reportgen.report import DecoderStatistics

    settings = config.patterns
    corpus_hashes = [file_sha256(f.path, "corpus file") for f in settings.corpus]
    key = key_of("decoder-patterns", PATTERNS_VERSION, stage.fingerprint,
                 [(r.spec.text, r.spec.pair) for r in stage.runs], corpus_hashes,
                 settings.model_dump(mode="json"), stage.max_length, INDUCTION_N, INDUCTION_BATCH, INDUCTION_SEED)
    cache = Cache(config.cache_dir)
    cached = cache.get_json("patterns", key)
    if cached is None:
        cached = _statistics(config, stage, progress)
        cache.put_json("patterns", key, cached)
    statistics = DecoderStatistics.model_validate(cached)
    if statistics.induction_missing:
        stage.warnings.append(statistics.induction_missing)
        warnings.warn(statistics.induction_missing, stacklevel=2)
    return statistics


def _statistics(config: Config, stage: Stage, progress: Callback) -> dict:
    """The examples' runs, the corpus sentences' (run one at a time, not kept) and the induction test's."""
    from reportgen.model.induction import begin_token, induction_length, run_induction
    from reportgen.model.run import run_example
    from reportgen.patterns.corpus import iter_corpus
    from reportgen.patterns.decoder_atlas import decoder_atlas

    runs = list(stage.runs)
    net, tokenizer = stage.load()
    if config.patterns.corpus:
        total = sum(1 for _ in iter_corpus(config.patterns.corpus))
        for done, spec in enumerate(iter_corpus(config.patterns.corpus), 1):
            runs.append(run_example(net, tokenizer, spec, stage.max_length))
            progress("Corpus patterns", done, total)
    progress("Induction test", 0, 1)
    try:
        begin_token(tokenizer)
        test = run_induction(net, tokenizer, induction_length(stage.max_length), seed=INDUCTION_SEED)
    except ValueError as err:
        missing = f"the induction test did not run: {err}"
        result = decoder_atlas(runs, None, None, config.patterns, linkable=len(stage.runs))
        return {**result, "induction_missing": missing}
    progress("Induction test", 1, 1)
    described = {"n": test.n, "sequences": len(test.ids), "seed": test.seed, "tokens": int(test.ids.shape[1])}
    return decoder_atlas(runs, test.attention, described, config.patterns, linkable=len(stage.runs))
