"""The ablation analyses: a model and a task in, what masking its heads does out.

Takes the model directory and `ablation` settings; gives the `Ablation` record of
`reportgen.report`. `tasks` loads the task data (through `reportgen.datafiles`) and scores outputs
(similarity, classification, masked LM), `engine` evaluates many head masks fast and caches each,
`experiments` holds the experiments (one function each), `head_pairs` the pairs' arithmetic and
`ray_runner` hands the masks to Ray actors, `watch` follows a running ablation for the
sites written while it runs. The tests and intervals are `reportgen.stats`.
Imports the model stage, never the site or the commands.
"""
