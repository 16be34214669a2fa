"""The views' JavaScript: Node's own test runner over tests/js/, and the scripts' load order.

The pure parts of site_src/assets/javascripts/views-core.js (8-bit decoding, top-k keys,
the deep-link format, the query/key arithmetic) load in Node without a DOM; tests/js/*.test.js
use only node:test and node:assert, so nothing is installed from npm.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from reportgen.site.views import HEATMAP_SCRIPT, QK_LONG_SCRIPT, VIEW_SCRIPTS
from tests.helpers import ROOT

SCRIPTS = ROOT / "site_src" / "assets" / "javascripts"


@pytest.mark.slow  # subprocess, browser or model work: over half a second of the fast tier
def test_node_unit_tests_pass():
    node = shutil.which("node")
    if node is None:
        pytest.fail("`node` (Node.js 20 or later) is not on PATH; it runs tests/js/ (apt-get install nodejs)")
    result = subprocess.run([node, "--test", str(ROOT / "tests" / "js")], cwd=ROOT, capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "# fail 0" in result.stdout and "# pass 0" not in result.stdout, result.stdout[-2000:]


def test_scripts_load_in_the_same_order_on_sites_and_standalone_pages():
    """Classic scripts share one namespace, so order matters: core first, charts.js right after it, start-up last."""
    listed = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["extra_javascript"]
    names = [Path(entry).name for entry in listed]
    # a long input's two scripts come after the others, and only on the pages that need them (issue 47)
    later = (HEATMAP_SCRIPT, QK_LONG_SCRIPT)
    assert [name for name in names if name.startswith("views-")] == [name for name in VIEW_SCRIPTS if name not in later]
    overrides = (ROOT / "site_src" / "overrides" / "main.html").read_text(encoding="utf-8")
    assert all(f"assets/javascripts/{name}" in overrides for name in later)
    assert names.index("charts.js") == names.index("views-core.js") + 1
    assert all((SCRIPTS / name).is_file() for name in names if name != "vega-bundle.js")  # the bundle is built
    assert sorted(p.name for p in SCRIPTS.glob("views*.js")) == sorted(VIEW_SCRIPTS)  # no file left out
