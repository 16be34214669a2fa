"""Activation patching on prompt pairs (issue 49): which heads carry a behaviour.

A clean prompt and a corrupted one differ in one detail; the metric is the logit difference of the answer over a
wrong answer at one position. Copying one head's output from one run into the other and measuring how much of
the difference moves (Wang et al. 2022; Meng et al. 2022) names the heads that carry it.

- `pairs`: the prompt pairs as token ids, from a JSONL file or built in (repeated random tokens for induction);
- `heads`: the model-side hooks that record each head's output and put another run's in its place;
- `sweep`: exact patching of each head (or each head at each position) over the pairs, in batched forwards;
- `attribution`: attribution patching, every head's estimated effect from two forwards and one backward a pair;
- `effects`: the normalised effects over pairs, with their bootstrap intervals and corrected tests, and how far
  attribution agrees with exact patching;
- `study`: the build's stage (config `patching:`): the pairs loaded, the sweeps within `max_masks`, the report's
  records, cached; `ray_sweep`: its exact sweeps on a Ray cluster.
"""
