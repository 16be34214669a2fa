"""The live export stage: a model in, what the "Your sentence" page runs in a reader's browser out (`views.live`).

Takes a loaded BERT-family encoder and its fast tokenizer; gives plain data the site writes as files: the
weights in one canonical layout (`weights`: a JSON spec and the bytes of its tensors, float16 or Rice-coded on a
grid calibrated on reportgen's own texts, `calibration`) and the tokenizer's settings (`tokenizer`), which
site_src/assets/javascripts/live-model.js and live-tokenizer.js read. A model the page cannot run is refused here,
by its `model_type`, before a build does any work (`weights.check_model_type`). Only the pipeline calls this stage,
and only for a site with `views.live`; nothing here imports another stage, the site or the commands.
"""
