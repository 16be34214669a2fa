"""A small character-level Chinese BERT for the tests of issue 14 part 3 (tests/test_char_model.py).

Seed 004's model is a character-level Chinese BERT: every CJK character is its own token, and word
boundaries exist only in a segmentation (jieba). No such model can be downloaded here, so the tests
make one: a vocabulary of the characters the texts use, transformers' BertTokenizer (in transformers 5
the fast, tokenizers-backed one) whose BertNormalizer has `handle_chinese_chars` (the
`tokenize_chinese_chars` option) put spaces around each CJK character, so its BertPreTokenizer splits
them one by one; and a tiny BertForMaskedLM, optionally trained a few steps so the masked-LM task has
an accuracy above zero for the ablation.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

CHAR_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

# Search queries and result titles (seed 004's query-title setting); jieba splits both into words of
# one to four characters, and each pair shares some words (北京, 手机 充电, 学习 中文 方法, 附近 好吃 火锅店).
CHAR_PAIRS = [
    ("北京今天天气怎么样", "北京天气预报：今天多云转晴"),
    ("手机充电很慢怎么办", "手机充电慢的原因和解决办法"),
    ("学习中文的好方法", "外国人学习中文有哪些好方法"),
    ("附近有什么好吃的火锅店", "本地火锅店推荐：附近好吃的火锅"),
]
CHAR_SENTENCES = [
    "我喜欢吃新鲜的草莓。",
    "今天北京的天气很好，我们去公园散步。",
    "这家火锅店的菜很新鲜，价格也不贵。",
    "他每天晚上学习两个小时的中文。",
    "手机的电池用了三年，充电越来越慢。",
    "明天多云转晴，适合出门旅游。",
    "外国人觉得中文的声调很难学。",
    "附近新开了一家书店，周末人很多。",
    "我们在公园里看见了很多小朋友。",
    "妈妈做的饭菜比饭店的好吃。",
    "这本书讲的是一个学生的故事。",
    "春天来了，公园里的花都开了。",
]


def char_vocabulary(texts: Sequence[str]) -> list[str]:
    """The special tokens, then every character of `texts` once, in code-point order (a stable vocabulary)."""
    return CHAR_SPECIALS + sorted(set("".join(texts)) - set(" \t\n"))


def make_char_bert(target: Path, texts: Sequence[str], layers: int = 2, heads: int = 4, seed: int = 0,
                   train_steps: int = 0) -> Path:
    """A character-level BertForMaskedLM with its tokenizer in `target` (safetensors, nothing downloaded).

    With `train_steps`, the model is trained that many steps of masked LM on `texts`, so that its
    masked-token accuracy is above chance and an ablation has something to lose.
    """
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertTokenizer

    torch.manual_seed(seed)
    vocabulary = char_vocabulary(texts)
    tokenizer = BertTokenizer(vocab={token: index for index, token in enumerate(vocabulary)},
                              tokenize_chinese_chars=True)
    tokenizer.save_pretrained(target)
    config = BertConfig(vocab_size=len(vocabulary), hidden_size=32, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=64, max_position_embeddings=128)
    model = BertForMaskedLM(config)
    if train_steps:
        train_masked_lm(model, tokenizer, texts, train_steps, seed)
    model.save_pretrained(target)  # safetensors: transformers 5 writes model.safetensors
    return target


def train_masked_lm(model, tokenizer, texts: Sequence[str], steps: int, seed: int = 0) -> list[float]:
    """A few steps of BERT's masked LM on all of `texts` at once (15% of the characters replaced by
    [MASK], Devlin et al. 2019 without the 80/10/10 split); returns the loss of each step."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    batch = tokenizer(list(texts), padding=True, return_tensors="pt", return_special_tokens_mask=True)
    maskable = (batch.pop("special_tokens_mask") == 0) & (batch["attention_mask"] == 1)
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    losses = []
    for _ in range(steps):
        chosen = maskable & (torch.rand(maskable.shape, generator=generator) < 0.15)
        inputs = batch["input_ids"].masked_fill(chosen, tokenizer.mask_token_id)
        labels = batch["input_ids"].masked_fill(~chosen, -100)
        loss = model(input_ids=inputs, attention_mask=batch["attention_mask"],
                     token_type_ids=batch["token_type_ids"], labels=labels).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    model.eval()
    return losses
