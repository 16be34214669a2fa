"""`reportgen build`: config -> model run -> analyses -> report (plain data) -> site, one module per stage.

- `model_stage`: the model's kind decided once (reportgen.kinds), every example's attention (cached);
- `analyses`: the atlases the kind measures, the ablation, the comparison model;
- `assemble`: the report, the manifest and what each example page draws;
- `driver`: the stages in order, partial sites while the ablation runs, the site written last.
"""

from reportgen.pipeline.driver import Built, build

__all__ = ["Built", "build"]
