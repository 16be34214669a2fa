"""Run at the start of every Python process the tests start: conftest.py puts this folder first on PYTHONPATH, and
Python imports a `sitecustomize` module it finds there before anything else.

It makes `import rfc3987_syntax` fail as if the package were absent, as it is from a user's `pip install reportgen`:
only the test extras bring it (JupyterLab -> jupyter-events -> jsonschema[format-nongpl]). jsonschema imports it, if
present, for its optional IRI format check, which no reportgen code or test uses, and it compiles 38 Lark grammars on
import: 3 s of CPU in every process that imports Altair (each build) or Ray (each Ray worker and helper process). On a
busy two-core machine that made Ray's own fixed 15 s start-up deadline fail (ray.init: "timed out during startup").
"""

import sys

sys.modules.setdefault("rfc3987_syntax", None)
