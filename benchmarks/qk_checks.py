"""The query/key page's own check on every supported encoder family (issue 30): the largest difference
between the softmax the page computes from the stored vectors (and score terms, and masked keys) and the
model's own weights, against what the 8/12-bit rounding of both allows; and the same check with the
score terms and the mask left out, which is what a page showing only softmax(scaling * q . k) would say.

Each family is the tiny random checkpoint of tests/architectures.py (3 layers x 4 heads), run on one pair.

Run: .venv/bin/python benchmarks/qk_checks.py
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reportgen.config import ExampleSpec  # noqa: E402
from reportgen.model import loading  # noqa: E402
from reportgen.model.run import run_example  # noqa: E402
from reportgen.site import views  # noqa: E402
from tests.architectures import FAMILIES, make_checkpoint  # noqa: E402

SPEC = ExampleSpec(text="the cat sat on the mat.", pair="a dog was in the garden.")
ADDED = ("qk_terms", "qk_term_names", "qk_visible")  # what the model adds to q . k (reportgen.model.qk)


def main() -> None:
    warnings.filterwarnings("ignore")
    loading.quiet_transformers()
    root = Path(tempfile.mkdtemp())
    print(f"{'family':22s} {'tokens':>6s} {'difference':>10s} {'rounding':>9s} {'without terms/mask':>19s}")
    for family in FAMILIES:
        model, tokenizer = loading.load(make_checkpoint(family, root / family), "cpu")
        run = run_example(model, tokenizer, SPEC, 128, keep_qk=True)
        check = views.qk_payload(run)["check"]
        run.extras = {name: value for name, value in run.extras.items() if name not in ADDED}
        bare = views.qk_payload(run)["check"]
        print(f"{family:22s} {run.n_tokens:6d} {check['difference']:10.4f} {check['rounding']:9.4f} "
              f"{bare['difference']:19.4f}")


if __name__ == "__main__":
    main()
