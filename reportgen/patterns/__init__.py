"""The pattern analyses: model runs in, per-head pattern statistics out (no torch).

Takes `reportgen.runs.ExampleRun` records (the examples', and sentences from `patterns.corpus`
files read by `corpus`) and the pattern settings; gives the `PatternStatistics` and per-example
`ExamplePattern` records of `reportgen.report`. `statistics` holds the per-head scores with their
nulls and labels (Clark, Voita, Kovaleva), `words` pieces and words, `similarity` how alike heads
attend, `noop` the [CLS]/[SEP] no-op test, `per_example` the heads that show each pattern on one
example, `conventions` the conventions stated on the pages. Imports no model code and no site.
"""
