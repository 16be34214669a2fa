"""Encoders (BERT, MiniLM, RoBERTa, ...): one text or a pair, self-attention over all of it, the encoder
atlas of Clark et al. (2019) and Voita et al. (2019), and any task but causal_lm and seq2seq."""

from __future__ import annotations

from collections.abc import Mapping

from reportgen.cache.store import Cache, key_of
from reportgen.config import Config
from reportgen.datafiles import file_sha256
from reportgen.kinds.base import CAUSAL_NEEDS, SEQ2SEQ_NEEDS, Atlas, Labels, ModelKind, Stage, refuse_targets
from reportgen.progress import Callback


class EncoderKind(ModelKind):
    name = "encoder"
    article = "an encoder"
    tasks = frozenset({"similarity", "classification", "mlm"})
    masked_prompts = True  # patching reads a masked-LM's logits at the prompt's [MASK]

    def holds(self, config: Mapping) -> bool:  # noqa: ARG002 (asked last)
        return True  # the last kind asked: what the file policy admits and is neither of the others

    def task_refusal(self, task: str) -> str:
        if task == "causal_lm":
            return f"an encoder, which sees the whole text; {CAUSAL_NEEDS}"
        return f"an encoder; for a masked-LM encoder use task 'mlm'; {SEQ2SEQ_NEEDS}"

    def examples(self, specs: list, config: Config) -> tuple[list, list[str]]:
        """Every example as it is; a `target` is refused (an encoder reads none)."""
        refuse_targets(specs, config.source)
        return specs, []

    def run(self, net, tokenizer, spec, max_length: int):
        from reportgen.model.run import run_example

        return run_example(net, tokenizer, spec, max_length, keep_qk=True)

    def atlas(self, config: Config, stage: Stage, progress: Callback) -> Atlas:
        return Atlas(encoder_statistics(config, stage, progress))

    def labels(self, run, settings) -> Labels:
        from reportgen.patterns.per_example import patterns_and_labels
        from reportgen.patterns.statistics import entropy

        found, labels = patterns_and_labels(run, settings)
        return Labels(found, labels, entropy(run.attention))


def encoder_statistics(config: Config, stage: Stage, progress: Callback):
    """The encoder atlas over the examples and the corpus files, cached as a whole (a compared model's too)."""
    from reportgen.patterns.statistics import RESULT_VERSION
    from reportgen.report import PatternStatistics

    settings = config.patterns
    corpus_hashes = [file_sha256(f.path, "corpus file") for f in settings.corpus]
    cache = Cache(config.cache_dir)
    key = key_of("patterns", RESULT_VERSION, stage.fingerprint,
                 [(r.spec.text, r.spec.pair) for r in stage.runs], corpus_hashes,
                 settings.model_dump(mode="json"), stage.max_length)
    cached = cache.get_json("patterns", key)
    if cached is None:
        cached = _statistics(config, stage, progress)
        for item in cached["settings"]["corpus"]:  # the report shows where the corpus is, not where the author is
            item["path"] = config.shown_path(item["path"])
        cache.put_json("patterns", key, cached)
    return PatternStatistics.model_validate(cached)


def _statistics(config: Config, stage: Stage, progress: Callback) -> dict:
    """Examples come first so that a head's strongest `example` is one with a page; corpus
    sentences run through the model one at a time and are not kept."""
    from reportgen.model.run import run_example
    from reportgen.patterns.corpus import iter_corpus
    from reportgen.patterns.statistics import PatternAccumulator

    settings = config.patterns
    accumulator = PatternAccumulator(settings)
    for run in stage.runs:
        accumulator.add(run)
    if settings.corpus:
        net, tokenizer = stage.load()
        total = sum(1 for _ in iter_corpus(settings.corpus))
        for done, spec in enumerate(iter_corpus(settings.corpus), 1):
            accumulator.add(run_example(net, tokenizer, spec, stage.max_length), linkable=False)
            progress("Corpus patterns", done, total)
    return accumulator.result()
