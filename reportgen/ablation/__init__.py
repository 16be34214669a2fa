"""The ablation analyses: a model and a task in, what masking its heads does out.

Takes the model directory and `ablation` settings; gives the `Ablation` record of
`reportgen.report`. `task_loading` loads the task and its data (through `reportgen.datafiles`; the
torch-free checks of the data are `task_checks`), `tasks` scores outputs (similarity, classification,
masked LM, causal LM, seq2seq), `engine` evaluates many head masks fast and caches each, `experiments`
holds the experiments (one function each) on the shared `experiment_context`, `experiment_stats` their
statistics' record fields, `head_pairs` the pairs' arithmetic, `records` runs them all and caches the
whole record, `ray_runner` hands the masks to Ray actors, `watch` follows a running ablation for the
sites written while it runs. The tests and intervals are `reportgen.stats`.
Imports the model stage, never the site or the commands.
"""
