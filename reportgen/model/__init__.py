"""The model stage: a model name in, its attention (and what it passes on) per example out.

Takes the config's `model` (the embedded default, a local directory or a Hub id) and the examples;
gives `reportgen.runs.ExampleRun` records (plain numpy) and a `ModelInfo`. Everything that touches
the network's modules lives here: finding and checking a checkpoint (`loading`), where a BERT-family
model keeps its heads (`head_sites`), one forward pass per example (`run`) with its query/key
vectors (`qk`) and value norms (`value_norms`), an encoder-decoder's teacher-forced (source, target)
pair (`seq2seq`), and masking heads without `head_mask` (`masking`), which the ablation stage drives.
Nothing here imports an analysis, the site or the commands.
"""
