"""One tiny random checkpoint per encoder family reportgen supports, saved as a user's model directory is.

`make_checkpoint(family, target, task)` writes config.json + model.safetensors (the family's base model,
sequence classifier or masked-LM class, by `task`) and a fast tokenizer trained here with `tokenizers` on
CORPUS (nothing is downloaded), saved with `save_pretrained` so that `AutoTokenizer.from_pretrained(target)`
gives the family's own tokenizer class where transformers 5 has one: its special tokens around a pair
([CLS] a [SEP] b [SEP], <s> a </s></s> b </s>, ...), word ids, a mask token, and only the inputs the model's
forward takes (`model_input_names`: no token_type_ids for DistilBERT, the RoBERTa-likes, MPNet, ModernBERT).

Every checkpoint has TINY_SHAPE (3 layers x 4 heads, hidden 32), positions for MAX_LENGTH tokens where they
are absolute, and initializer_range 0.3 so that the attention is far from uniform. FAMILIES is ordered and
keyed by model_type; tests/model/test_architectures.py is parametrized over it and renders the support table
of docs/pages/reference/architectures.md from it. `Checkpoints` builds each (family, task) once into a
directory and hands it out again.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from tests.helpers import GRADED_PAIRS, TWO_EXAMPLES

TASKS = ("similarity", "classification", "mlm")
NUM_LABELS = 2  # the classification data of the tests: graded pairs, label = grade >= 3
MAX_LENGTH = 128  # the tokenizers' model_max_length and the tests' max_length
VOCAB_SIZE = 400  # asked of the tokenizer trainers; a tiny corpus may give fewer
# The shape of every checkpoint (DistilBERT names the fields its own way: Family.renames).
TINY_SHAPE = dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64,
                  max_position_embeddings=MAX_LENGTH + 32, initializer_range=0.3)

# What the tokenizers are trained on: the tiny sites' examples, the graded pairs, and some everyday sentences.
CORPUS = [example[key] for example in TWO_EXAMPLES for key in ("text", "pair") if key in example]
CORPUS += [text for a, b, _ in GRADED_PAIRS for text in (a, b)]
CORPUS += [
    "The quick brown fox jumps over the lazy dog.",
    "She sells sea shells by the sea shore, and he buys them.",
    "A red car was parked in front of the old house on the hill.",
    "We walked to the park after dinner and watched the sunset.",
    "Reading a good book on a rainy afternoon is a simple pleasure.",
    "The committee met on Tuesday, and after a long debate it approved the budget.",
    "How many people live in the largest city of the country?",
    "My brother plays football every weekend with his friends.",
    "The children were playing with a ball in the garden!",
    "Fresh strawberries, bread and cheese were on the kitchen table.",
    "Running shoes for beginners: what to look for when buying them.",
    "The museum opens at nine and closes at five every day except Monday.",
]


# -- tokenizers --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TokenizerStyle:
    """How a family tokenizes: the model trained (wordpiece, byte-level bpe, unigram), its special tokens in
    vocabulary order (ids 0, 1, ...), their roles, and how many separators stand between the texts of a pair
    (1: [CLS] a [SEP] b [SEP]; 2: <s> a </s></s> b </s>)."""

    model: str
    specials: tuple[str, ...]
    roles: dict[str, str]  # cls_token, sep_token, pad_token, unk_token, mask_token (, bos_token, eos_token)
    separators: int = 1


BERT_ROLES = dict(cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", unk_token="[UNK]", mask_token="[MASK]")
ROBERTA_ROLES = dict(bos_token="<s>", eos_token="</s>", cls_token="<s>", sep_token="</s>", pad_token="<pad>",
                     unk_token="<unk>", mask_token="<mask>")
STYLES = {
    # BERT's vocab.txt order: [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4
    "bert-wordpiece": TokenizerStyle("wordpiece", ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"), BERT_ROLES),
    # MPNet: BERT's WordPiece with RoBERTa's specials; <pad> is 1 (position ids start after the padding index)
    "mpnet-wordpiece": TokenizerStyle("wordpiece", ("<s>", "<pad>", "</s>", "[UNK]", "<mask>"),
                                      {**ROBERTA_ROLES, "unk_token": "[UNK]"}, 2),
    # RoBERTa: byte-level BPE, <s> 0, <pad> 1, </s> 2, <unk> 3
    "roberta-bpe": TokenizerStyle("bpe", ("<s>", "<pad>", "</s>", "<unk>", "<mask>"), ROBERTA_ROLES, 2),
    # DeBERTa (v1): GPT-2's byte-level BPE with BERT's specials, [PAD] 0, [CLS] 1, [SEP] 2, [UNK] 3; transformers
    # 5's DebertaTokenizer puts two [SEP] between the texts of a pair
    "deberta-bpe": TokenizerStyle("bpe", ("[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"),
                                  {**BERT_ROLES, "bos_token": "[CLS]", "eos_token": "[SEP]"}, 2),
    # ModernBERT: OLMo's byte-level BPE with BERT's specials and template, no token types
    "modernbert-bpe": TokenizerStyle("bpe", ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"), BERT_ROLES),
    # XLM-R, CamemBERT: SentencePiece unigram, <s> 0, <pad> 1, </s> 2, <unk> 3
    "xlmr-unigram": TokenizerStyle("unigram", ("<s>", "<pad>", "</s>", "<unk>", "<mask>"), ROBERTA_ROLES, 2),
    # ALBERT: SentencePiece unigram, <pad> 0, <unk> 1, [CLS] 2, [SEP] 3, [MASK] 4
    "albert-unigram": TokenizerStyle("unigram", ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"),
                                     {**BERT_ROLES, "pad_token": "<pad>", "unk_token": "<unk>"}),
    # DeBERTa-v2/v3: SentencePiece unigram, [PAD] 0, [CLS] 1, [SEP] 2, [UNK] 3
    "deberta-unigram": TokenizerStyle("unigram", ("[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"), BERT_ROLES),
}


@lru_cache(maxsize=None)
def trained_tokenizer(style: str) -> str:
    """A `tokenizers` model of `style` trained on CORPUS, as the JSON of its tokenizer (a str, so the cache
    hands out no shared mutable object)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    spec = STYLES[style]
    specials = list(spec.specials)
    if spec.model == "wordpiece":
        tokenizer = Tokenizer(models.WordPiece(unk_token=spec.roles["unk_token"]))
        tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        trainer = trainers.WordPieceTrainer(vocab_size=VOCAB_SIZE, special_tokens=specials, show_progress=False)
    elif spec.model == "bpe":
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=specials, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    else:
        tokenizer = Tokenizer(models.Unigram())
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")])
        trainer = trainers.UnigramTrainer(vocab_size=VOCAB_SIZE, special_tokens=specials, show_progress=False,
                                          unk_token=spec.roles["unk_token"])
    tokenizer.train_from_iterator(CORPUS, trainer)
    ids = {token: tokenizer.token_to_id(token) for token in specials}
    assert ids == {token: index for index, token in enumerate(specials)}, f"{style}: special ids {ids}"
    return tokenizer.to_str()


def family_tokenizer(family: Family):
    """The family's fast tokenizer over the trained vocabulary, built by its own transformers class."""
    import transformers
    from tokenizers import Tokenizer, decoders, processors

    spec = STYLES[family.tokenizer]
    trained = trained_tokenizer(family.tokenizer)
    options = {"model_max_length": MAX_LENGTH, **spec.roles}
    if family.tokenizer == "modernbert-bpe":
        # transformers has no ModernBERT tokenizer class (AutoTokenizer gives TokenizersBackend, as for the
        # real checkpoints, whose tokenizer.json carries the template): the trained BPE with BERT's template.
        backend = Tokenizer.from_str(trained)
        cls_id, sep_id = spec.specials.index("[CLS]"), spec.specials.index("[SEP]")
        backend.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
            special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
        backend.decoder = decoders.ByteLevel()
        return transformers.PreTrainedTokenizerFast(tokenizer_object=backend, **options,
                                                    model_input_names=["input_ids", "attention_mask"])
    cls = getattr(transformers, family.tokenizer_class)
    model = json.loads(trained)["model"]
    if spec.model == "wordpiece":
        return cls(vocab=model["vocab"], **options)
    if spec.model == "bpe":
        merges = [tuple(pair) if isinstance(pair, list) else tuple(pair.split(" ")) for pair in model["merges"]]
        return cls(vocab=model["vocab"], merges=merges, **options)
    return cls(vocab=[tuple(entry) for entry in model["vocab"]], **options)


# -- families --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Family:
    """How to build one encoder family's tiny checkpoint."""

    model_type: str
    name: str  # as the docs name it
    prefix: str  # transformers class prefix: {prefix}Config, {prefix}Model, {prefix}ForMaskedLM, ...
    tokenizer: str  # a STYLES key
    tokenizer_class: str  # the transformers tokenizer class (unused for modernbert-bpe)
    config: dict = field(default_factory=dict)  # family-specific config fields over TINY_SHAPE
    note: str = ""  # what the config adds to TINY_SHAPE, for the docs' table
    renames: dict = field(default_factory=dict)  # TINY_SHAPE field -> this config's name for it

    @property
    def classes(self) -> dict[str, str]:
        """The transformers model class of each task."""
        return {"similarity": f"{self.prefix}Model", "classification": f"{self.prefix}ForSequenceClassification",
                "mlm": f"{self.prefix}ForMaskedLM"}


_DEBERTA_V2 = dict(relative_attention=True, pos_att_type=["p2c", "c2p"], position_buckets=16, max_relative_positions=-1,
                   share_att_key=True, norm_rel_ebd="layer_norm", position_biased_input=False)
_FAMILIES = [
    Family("bert", "BERT", "Bert", "bert-wordpiece", "BertTokenizer"),
    Family("roberta", "RoBERTa", "Roberta", "roberta-bpe", "RobertaTokenizer"),
    Family("xlm-roberta", "XLM-RoBERTa", "XLMRoberta", "xlmr-unigram", "XLMRobertaTokenizer"),
    Family("distilbert", "DistilBERT", "DistilBert", "bert-wordpiece", "DistilBertTokenizer",
           renames=dict(hidden_size="dim", num_hidden_layers="n_layers", num_attention_heads="n_heads",
                        intermediate_size="hidden_dim")),
    Family("albert", "ALBERT", "Albert", "albert-unigram", "AlbertTokenizer", dict(embedding_size=16),
           "embedding 16, one layer shared by all 3 depths"),
    Family("electra", "ELECTRA", "Electra", "bert-wordpiece", "ElectraTokenizer", dict(embedding_size=16),
           "embedding 16"),
    Family("deberta", "DeBERTa", "Deberta", "deberta-bpe", "DebertaTokenizer",
           dict(relative_attention=True, pos_att_type=["c2p", "p2c"], max_relative_positions=-1,
                position_biased_input=False),
           "relative attention c2p + p2c, no absolute positions"),
    Family("deberta-v2", "DeBERTa-v2", "DebertaV2", "deberta-unigram", "DebertaV2Tokenizer", _DEBERTA_V2,
           "relative attention p2c + c2p, 16 log buckets, shared keys, no absolute positions"),
    Family("camembert", "CamemBERT", "Camembert", "xlmr-unigram", "CamembertTokenizer"),
    Family("mpnet", "MPNet", "MPNet", "mpnet-wordpiece", "MPNetTokenizer", dict(relative_attention_num_buckets=32),
           "relative position bias, 32 buckets"),
    Family("megatron-bert", "Megatron-BERT", "MegatronBert", "bert-wordpiece", "BertTokenizer",
           note="pre-LayerNorm layers"),
    Family("roberta-prelayernorm", "RoBERTa-PreLayerNorm", "RobertaPreLayerNorm", "roberta-bpe", "RobertaTokenizer",
           note="pre-LayerNorm layers"),
    Family("xlm-roberta-xl", "XLM-RoBERTa-XL", "XLMRobertaXL", "xlmr-unigram", "XLMRobertaTokenizer",
           note="pre-LayerNorm layers"),
    Family("ernie", "ERNIE", "Ernie", "bert-wordpiece", "BertTokenizer"),
    Family("modernbert", "ModernBERT", "ModernBert", "modernbert-bpe", "PreTrainedTokenizerFast",
           dict(local_attention=8, global_attn_every_n_layers=2),
           "rotary positions; layers 0 and 2 global, layer 1 a sliding window of 8 tokens"),
]
FAMILIES: dict[str, Family] = {family.model_type: family for family in _FAMILIES}


def shape_text() -> str:
    """TINY_SHAPE in words: what every checkpoint has."""
    return (f"{TINY_SHAPE['num_hidden_layers']} layers x {TINY_SHAPE['num_attention_heads']} heads, hidden "
            f"{TINY_SHAPE['hidden_size']}, feed-forward {TINY_SHAPE['intermediate_size']}, "
            f"initializer_range {TINY_SHAPE['initializer_range']}")


def describe(family: Family) -> str:
    """The tiny config of `family` beyond TINY_SHAPE, in words (the docs table's second column)."""
    return f"`{family.prefix}Config`" + (f": {family.note}" if family.note else "")


def model_config(family: Family, tokenizer):
    """The family's config of TINY_SHAPE for this tokenizer's vocabulary and special token ids."""
    import transformers

    fields = {family.renames.get(key, key): value for key, value in TINY_SHAPE.items()}
    fields.update(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, num_labels=NUM_LABELS)
    if family.model_type == "modernbert":
        fields.update(cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id,
                      bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id)
    elif tokenizer.bos_token_id is not None:
        fields.update(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    fields.update(family.config)
    return getattr(transformers, f"{family.prefix}Config")(**fields)


def make_checkpoint(family: str, target_dir: Path, task: str = "similarity", seed: int = 0) -> Path:
    """A random tiny checkpoint of `family` for `task` in `target_dir` (config.json, model.safetensors and the
    tokenizer's files), as a user's model directory is; returns `target_dir`."""
    import torch
    import transformers

    spec = FAMILIES[family]
    if task not in TASKS:
        raise ValueError(f"task {task!r} is none of {TASKS}")
    target_dir = Path(target_dir)
    target_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = family_tokenizer(spec)
    config = model_config(spec, tokenizer)
    torch.manual_seed(seed)
    model = getattr(transformers, spec.classes[task])(config).eval()
    model.save_pretrained(target_dir)  # safetensors
    tokenizer.save_pretrained(target_dir)
    return target_dir


class Checkpoints:
    """Each (family, task) checkpoint built once under `root`, then handed out again (a session's cache)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._built: dict[tuple[str, str], Path] = {}

    def get(self, family: str, task: str = "similarity") -> Path:
        key = (family, task)
        if key not in self._built:
            target = self.root / f"{family}-{task}"
            shutil.rmtree(target, ignore_errors=True)  # a build that failed half-way
            self._built[key] = make_checkpoint(family, target, task)
        return self._built[key]
