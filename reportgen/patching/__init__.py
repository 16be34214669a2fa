"""Activation patching on prompt pairs (issue 49): which heads carry a behaviour.

A clean prompt and a corrupted one differ in one detail; the metric is the logit difference of the answer over a
wrong answer at one position. Copying one head's output from one run into the other and measuring how much of
the difference moves (Wang et al. 2022; Meng et al. 2022) names the heads that carry it.

- `pairs`: the prompt pairs as token ids, from a JSONL file or built in (repeated random tokens for induction);
- `heads`: the model-side hooks that record each head's output and put another run's in its place;
- `effects`: the normalised effects over pairs, with their bootstrap intervals and corrected tests.
"""
