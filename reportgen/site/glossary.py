"""The glossary: the terms the pages use, each with a one-sentence definition.

The glossary page (glossary.md) lists every term; on every other page each use of a term links
to its entry and shows the definition as a tooltip (reportgen.site.term_links, a Markdown
extension in mkdocs.yml). Only the site's own sentences get these links: `shield` keeps
user text (example texts, names, paths) from ever matching a term.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PAGE = "glossary.md"


@dataclass(frozen=True)
class Term:
    id: str  # the anchor on the glossary page
    name: str  # the heading
    forms: tuple[str, ...]  # the words that are linked to it, matched whole and in any case
    definition: str  # plain text: the tooltip, and the first paragraph of the entry


TERMS: tuple[Term, ...] = (
    # The model and what is done to it (issue 28: a newcomer meets these words first). A word as common on the
    # pages as "head" or "layer" is linked only in its long form, or a page would be a sea of links.
    Term("head", "Head", ("attention head", "attention heads"),
         "One attention head: in each layer, the model splits its attention into several heads, each with its own "
         "weights, that decide separately which tokens every token looks at. Heads are named by layer and "
         "number, both counted from 0 (layer 2 head 5)."),
    Term("layer", "Layer", ("transformer layer", "transformer layers"),
         "One of the model's stacked blocks; each holds the same number of attention heads and reads what the "
         "layer below wrote. Layer 0 is the first, closest to the input."),
    Term("masking", "Masking a head", ("masking",),
         "Switching one head off while every other weight stays as it is: its output is set to zero (or its "
         "attention made uniform, as the ablation page states), and the task is scored again to see what the "
         "model loses."),
    Term("cls-sep", "[CLS] and [SEP]", (),
         "Special tokens the tokenizer adds to every input: [CLS] (or <s>) at the start and [SEP] (or </s>) at "
         "the end of each sentence. They carry no word; heads with nothing to do often rest their attention on "
         "them."),
    Term("relative-change", "Relative change", ("relative change", "relative changes"),
         "A change of the task's metric as a share of the unmasked model's score: (masked - unmasked) / unmasked, "
         "in percent; -1.0% means 1% lower. The absolute change (masked - unmasked, in the metric's own units) "
         "is given beside it where it matters."),
    Term("significant", "Significant", ("significant",),
         "A change is significant when its stated test, after the stated correction for many tests, gives a "
         "p-value below alpha (0.05 unless the page says otherwise). Not significant does not mean no change: "
         "the data could not tell."),
    # The task metrics (reportgen/ablation/tasks.py: similarity, classification, masked-token and next-token
    # prediction); the ids are the metric keys of names.METRICS, with "-" for "_".
    Term("spearman", "Spearman correlation", ("Spearman",),
         "How well the model's scores rank the examples as the gold grades do: the correlation between the "
         "ranks of the two, from -1 to 1. 1: the same order as the grades; 0: no relation. Only the order of "
         "the scores counts, not their size. The similarity task's main metric."),
    Term("pearson", "Pearson correlation", ("Pearson",),
         "How close the model's scores and the gold grades are to a straight-line relation, from -1 to 1 (1: "
         "exactly on one rising line). Reported beside Spearman for the similarity task."),
    Term("accuracy", "Accuracy", ("accuracy",),
         "The share of answers the model gets right: for classification, the texts given their gold label; for "
         "masked-token prediction, the masked tokens predicted exactly."),
    Term("macro-f1", "Macro-F1", ("macro-F1",),
         "For classification: the F1 score (the harmonic mean of precision and recall) of each label, averaged "
         "so that every label counts the same, however rare. Reported beside accuracy."),
    Term("mcc", "MCC", ("MCC", "Matthews correlation"),
         "Matthews correlation coefficient, for classification: the correlation between the predicted and the "
         "gold labels, from -1 to 1, 0 for guessing; it stays fair when some labels are much more frequent. "
         "Reported beside accuracy."),
    Term("loss", "Loss", ("cross-entropy",),
         "The task's loss: for classification and masked-token prediction the mean cross-entropy, -ln of the "
         "probability the model gives the right answer (lower is better); for similarity the squared error "
         "between the (calibrated) similarity and the gold grade scaled to 0-1; for next-token prediction "
         "(a decoder) the cross-entropy of each token given the ones before it, averaged over all predicted "
         "tokens, and its perplexity is exp(loss)."),
    # How attention is measured, and how the tests decide.
    Term("entropy", "Entropy", ("entropy", "entropies"),
         "How spread one token's attention is: -sum of a ln a over its weights a, in nats, averaged over the "
         "tokens. 0 means all weight on one token; ln n means the same weight on all n tokens. The weights are "
         "smoothed first, 0.9999 a + 0.0001/n (Clark et al. 2019), so that ln 0 never occurs."),
    Term("nats", "Nats", ("nats", "nat"),
         "The unit of entropy measured with the natural logarithm: ln 2, about 0.69 nats, is one bit. Uniform "
         "attention over n tokens has an entropy of ln n nats."),
    Term("effective-share", "Effective share", ("effective share",),
         "exp(entropy) / n, per input and then averaged: the share of the tokens that uniform attention would "
         "have to cover to be as spread as the head. 1 for uniform attention; unlike entropy / ln n it does not "
         "drift with the length of the input. A head is broad when its effective share reaches the threshold "
         "given on the patterns page."),
    Term("argmax-test", "Argmax test", ("argmax test", "argmax share", "argmax"),
         "Voita et al. (2019)'s test for a positional head: the share of tokens whose largest weight is on one "
         "fixed neighbour (the previous or the next token); a head passes at 90% or more. Clark et al. (2019) "
         "instead average the weight on the neighbour and call a head positional above 0.5. A head can pass "
         "one test and fail the other, so the pages name both."),
    Term("denominator", "n - 1 denominator", ("n-1 denominator", "Clark's /n"),
         "Next- and previous-token scores are averaged over the tokens that have such a neighbour (n - 1 of "
         "them), so a pure next-token head scores exactly 1 at any length. Clark et al. (2019) divide by all n "
         "tokens; their value (Clark's /n) is this one times (n - 1) / n and is shown alongside."),
    Term("pooled-mean", "Mean and spread per head", ("standard deviation",),
         "How a head's pattern numbers are taken over the inputs (the examples and any corpus sentences; for "
         "cross-attention the examples). Each input first gets its own score, the statistic over its tokens. "
         "Encoder patterns: the mean of these scores, every input alike. Decoder and cross-attention patterns: "
         "the mean over every attending token the statistic counts, in all inputs together, i.e. of the scores "
         "each weighted by its input's number of such tokens (the induction test's random sequences are all of "
         "one length). The standard deviation (std) beside a mean is of the same scores with the same weights, "
         "a population one (divided by their number, not by one less); min and max are the lowest and highest "
         "score. An input the statistic does not apply to counts in none of these."),
    Term("null", "Null", ("null", "nulls"),
         "What a head with a known simple pattern scores on the same inputs: a uniform head (1/n on every "
         "token), a pure previous-token head and a pure next-token head. A pattern score says something about "
         "a head only where it differs from these."),
    Term("induction-test", "Induction test", ("induction test", "induction head", "induction heads"),
         "Olsson et al. (2022)'s test for an induction head, in a decoder: the model reads a start token and a "
         "sequence of random tokens twice; at each token of the second copy, the test measures the weight on "
         "the token that followed the same token in the first copy. Random tokens leave a head nothing to go on "
         "but the repeat, so a high score means the head completes repeated patterns ([A][B] ... [A] -> [B])."),
    Term("causal-null", "Uniform causal head", ("uniform causal head", "causal null"),
         "The null of a decoder's heads: a decoder's token sees only itself and the tokens before it, so the "
         "uniform head puts 1/(q+1) on each of the q+1 tokens it sees (not 1/n on all n). Every decoder score "
         "is shown beside what this head scores on the same tokens."),
    Term("perplexity", "Perplexity", ("perplexity",),
         "exp(loss) of next-token prediction: the number of equally likely tokens the model is, on average, as "
         "unsure as choosing among. Lower is better; a model that guesses uniformly over a vocabulary of V "
         "tokens has a perplexity of V."),
    Term("boundary-selectivity", "Boundary selectivity", ("boundary selectivity",),
         "The mean weight on a neighbouring token in the same word minus the mean weight on a neighbouring "
         "token across a word boundary. Any purely positional head scores 0, because it weighs a neighbour "
         "the same whether or not a boundary lies between them; a head that follows word structure scores "
         "above 0."),
    Term("word-piece", "Word piece", ("word piece", "word pieces"),
         "A part of a word as the tokenizer splits it: 'strawberries' becomes straw and ##berries."),
    Term("space-mark", "Space mark (\u2423)", ("space mark",),
         "The sign \u2423 at the start of a token: the token begins with a space. Byte-level tokenizers (GPT-2, "
         "Qwen2) keep the space inside the next word's token and write it as \u0120; SentencePiece (Llama, T5) "
         "writes \u2581. The pages show \u2423 for both, and \u21b5 for a line break."),
    Term("no-op", "No-op", ("no-op",),
         "Attention that changes little: a head with nothing to do can put its weight on [CLS], [SEP] or "
         "punctuation (Clark et al. 2019); such tokens pass on little through the head (Kobayashi et al. 2020)."),
    Term("contribution", "Contribution", ("contribution", "contributions"),
         "What a token actually passes on to the attending token through a head (Kobayashi et al. 2020): the "
         "attention weight times the length of the token's value vector after the head's value and output "
         "projections, ||A[i, j] f(x_j)||, shown as a share of all that the head passes on to the attending token. "
         "A token with much weight but a short value passes on little, so a head can look at [SEP] and pass on "
         "almost nothing from it."),
    Term("jensen-shannon", "Jensen-Shannon divergence", ("Jensen-Shannon divergence", "Jensen-Shannon"),
         "A symmetric distance between two distributions, 0 when they are equal and at most ln 2 nats; here "
         "between two heads' attention over the same tokens (Clark et al. 2019)."),
    Term("mds", "MDS", ("MDS",),
         "Multidimensional scaling: points placed in two dimensions so that their distances match given "
         "distances (here between heads) as closely as possible."),
    Term("importance", "Importance", ("importance",),
         "Michel et al. (2019)'s head importance: the absolute gradient of the task loss with respect to a gate "
         "on the head's output (at 1, the unmasked model), averaged over the task's examples: how fast the "
         "loss changes as the head is turned down. The ablation page states the loss used."),
    Term("bootstrap-ci", "Bootstrap CI", ("bootstrap CI", "bootstrap", "confidence interval", "CI"),
         "A 95% confidence interval found by resampling the examples with replacement many times and taking "
         "the middle 95% of the recomputed values. It says how precise a value is; it is not a test of whether "
         "a change is zero."),
    Term("permutation-test", "Permutation test", ("permutation test", "permutation tests", "permutations"),
         "A test of a change on the same examples under two conditions (paired): each example's two outputs are "
         "swapped at random, B times, and the p-value is (1 + the number of swaps that change the metric at "
         "least as much as observed, either way) / (B + 1). It cannot go below 1/(B + 1), so a p-value at that "
         "floor is printed as a bound (p <= ...)."),
    Term("p-value", "p-value", ("p-value", "p-values"),
         "How often a difference at least this large would come up if the two conditions did not differ; "
         "small values are evidence of a difference. It is not the chance that there is none."),
    Term("holm", "Holm correction", ("Holm", "Bonferroni"),
         "A correction for many tests at once (Holm 1979): the m p-values are sorted and the i-th smallest is "
         "multiplied by m - i + 1 (never below the one before). It bounds the chance of any false finding among "
         "all the tests, like Bonferroni's (multiply each p-value by m), with more power."),
    Term("activation-patching", "Activation patching", ("activation patching", "patching"),
         "Running the model on a clean prompt and on a corrupted one that differs in one detail, and copying one "
         "head's output from one run into the other: how much of the answer's lead (the logit difference) moves "
         "says how much that head carries the behaviour (Wang et al. 2022)."),
    Term("logit-difference", "Logit difference", ("logit difference",),
         "The model's score for the right answer minus its score for a wrong one, at the position it answers: "
         "above 0 it prefers the right answer. Patching effects are shares of the difference between the clean "
         "and the corrupted prompt."),
    Term("denoising", "Denoising and noising", ("denoising", "noising"),
         "Two ways to patch: denoising copies a head from the clean run into the corrupted one (the share it "
         "restores); noising copies it from the corrupted run into the clean one (the share lost, what the "
         "behaviour needs)."),
    Term("attribution-patching", "Attribution patching", ("attribution patching",),
         "An estimate of every head's patching effect at once, from the gradient of the logit difference times "
         "the change of the head's output between the two runs (Nanda 2023); exact patching checks it."),
    Term("non-inferiority", "Non-inferiority", ("non-inferiority", "non-inferior"),
         "A claim that a change costs at most a stated margin: it holds when the whole 95% confidence interval "
         "of the paired change lies above minus the margin. Finding no significant difference is not enough."),
    Term("margin", "Margin", ("margin",),
         "The largest loss a non-inferiority claim accepts, relative to the unmasked model's metric: "
         "ablation.margin in the configuration, 1% by default."),
)

BY_ID = {term.id: term for term in TERMS}
_FORMS = {form.lower(): term for term in TERMS for form in term.forms}
# Whole words only, longest form first ("bootstrap CI" before "bootstrap"), in any case.
PATTERN = re.compile(r"\b(?:" + "|".join(re.escape(form) for form in sorted(_FORMS, key=len, reverse=True)) + r")\b",
                     re.IGNORECASE)


def term_for(text: str) -> Term:
    """The term a PATTERN match names."""
    return _FORMS[text.lower()]


def shield(html_text: str) -> str:
    """Inert user text (htmlsafe.inert_text) with every glossary word broken for the matcher.

    The first letter of each match becomes a numeric character reference: the browser shows
    the same letter, but Python-Markdown stores references aside while extensions run, so
    the term-link extension never sees the word and adds no link or tooltip to user text.
    Repeated until nothing matches: breaking "bootstrap CI" leaves "CI", itself a term.
    """
    while PATTERN.search(html_text):
        html_text = PATTERN.sub(lambda m: f"&#{ord(m.group()[0])};{m.group()[1:]}", html_text)
    return html_text
