"""Sites built from user input in a real browser: hostile text shown literally, a two-model comparison,
a 512-token example. Each builds its own (tiny) site, so this file runs apart from the default-site
checks of tests/site/browser/test_site_browser.py and the two can share the workers."""

import json
import shutil

import numpy as np
import pytest

from tests.helpers import VIEW_DRAWN, check_report

pytestmark = pytest.mark.slow


def test_hostile_text_is_shown_literally_in_the_site(tmp_path, tiny_model, open_page):
    from reportgen.config import load_config
    from reportgen.pipeline import build
    from tests.helpers import write_config

    payloads = ["</script><script>alert(1)</script>", "<img src=x onerror=alert(2)>",
                "[click](javascript:alert(3))", "{{ 7*7 }} {% raw %}",
                "**bold** <b>tag</b>\n\n<script>alert(4)</script>"]
    examples = "".join(f"  - text: {json.dumps(p)}\n    pair: {json.dumps(p)}\n    name: {json.dumps(p)}\n"
                       for p in payloads)
    # The model's name (its directory) and the dataset's name are user text too.
    hostile_dir = "<img src=x onerror=alert(5)>"
    shutil.copytree(tiny_model, tmp_path / hostile_dir)
    data = tmp_path / "<script>alert(6)<"
    data.mkdir()
    (data / "d.tsv").write_text("sentence1\tsentence2\tscore\n" +
                                "".join(f"the cat {i}\tthe dog {i}\t{i % 5}\n" for i in range(30)))
    write_config(tmp_path, f"title: {json.dumps(payloads[0])}\nmodel: {json.dumps('./' + hostile_dir)}\n"
                           f"device: cpu\nexamples:\n{examples}"
                           f"ablation:\n  data: {json.dumps(str(data / 'd.tsv'))}\n  seeds: [0]\n"
                           "  fractions: [0.0, 0.5]\n  bootstrap_samples: 100\n  permutations: 100\n")
    build(load_config(tmp_path / "reportgen.yaml"))
    pages = ["index.html", "examples.html", "ablation.html", "manifest.html"]
    view = None
    for name in pages + [f"example-{i}.html" for i in range(1, len(payloads) + 1)]:
        view = open_page((tmp_path / "site" / name).as_uri(), reuse=view)
        assert view.dialogs == [] and view.errors == [], name
        assert view.page.locator("article img").count() == 0, name
        assert view.page.locator("article a[href^='javascript']").count() == 0, name
        text = view.page.inner_text("body")
        if name.startswith("example-"):
            i = int(name.split("-")[1].split(".")[0]) - 1
            assert " ".join(payloads[i].split()) in text, name
        if name in ("index.html", "manifest.html"):
            assert hostile_dir in text, name
        if name == "ablation.html":
            assert "<script>alert(6)<" in text
    assert payloads[0] in view.page.title()  # the site title, escaped in <title> and shown as text


def test_two_model_comparison_renders(tmp_path, tiny_model, open_page):
    from reportgen.config import load_config
    from reportgen.pipeline import build
    from tests.helpers import make_tiny_bert, write_config

    other = make_tiny_bert(tmp_path / "other", seed=1)
    write_config(tmp_path, f"model: {tiny_model}\ndevice: cpu\ncompare:\n  model: {other}\n  name: fine-tuned\n"
                           "examples:\n  - text: the cat sat on the mat.\n  - text: i went to the store.\n"
                           "    pair: at the store, i bought fresh strawberries.\n"
                           "ablation:\n  limit: 30\n  seeds: [0]\n  fractions: [0.0, 0.5]\n"
                           "  bootstrap_samples: 100\n  permutations: 100\n")
    build(load_config(tmp_path / "reportgen.yaml"))
    report = check_report(tmp_path / "site")
    comparison = report["comparison"]
    assert comparison["model"]["name"] == "fine-tuned" and comparison["same_shape"]
    assert comparison["model"]["fingerprint"] != report["model"]["fingerprint"]
    a = np.array(report["statistics"]["entropy"]["mean"])
    b = np.array(comparison["statistics"]["entropy"]["mean"])
    assert not np.allclose(a, b)  # two different random models
    view = open_page((tmp_path / "site" / "compare.html").as_uri())
    view.page.wait_for_selector("#compare-broad-3 svg", timeout=10_000)
    rows = view.page.evaluate("() => document.getElementById('compare-broad-3').rgView.data('source_0')")
    cell = next(r for r in rows if r["layer"] == 1 and r["head"] == 2)
    assert cell["value"] == pytest.approx(b[1, 2] - a[1, 2], abs=1e-5)
    assert view.page.locator("#compare-ablation-single-heads-3 svg").count() == 1
    assert view.errors == [] and view.remote_requests == []


def test_a_512_token_example_builds_and_renders(tmp_path, open_page):
    from reportgen.config import load_config
    from reportgen.pipeline import build
    from reportgen.site import view_files
    from tests.helpers import write_config

    long_text = " ".join(f"word{i % 50} and the next one" for i in range(200))  # far over 512 tokens
    write_config(tmp_path, f"examples:\n  - text: {json.dumps(long_text)}\nablation:\n  enabled: false\n")
    build(load_config(tmp_path / "reportgen.yaml"))
    report = check_report(tmp_path / "site")
    example = report["examples"][0]
    assert example["n_tokens"] == 512 and example["truncated"] and example["qk_mb"] is None
    assert example["qk_page"] == "example-1-qk.html"  # its q and k (5.1 MB) are within views.query_key_mb
    assert any("truncated to 512 tokens" in w for w in report["warnings"])
    view = open_page((tmp_path / "site" / "example-1.html").as_uri(), wait_ms=0)
    view.page.wait_for_selector(".rgv[data-first-render-ms]", timeout=10_000)
    first_render = float(view.page.get_attribute(".rgv[data-first-render-ms]", "data-first-render-ms"))
    assert first_render < 2000
    assert "truncated" in view.page.inner_text("article").lower()
    assert view.errors == [] and view.remote_requests == []
    # its query/key page, one query at a time: a page of keys, the weights from the example page's own files
    view = open_page((tmp_path / "site" / "example-1-qk.html").as_uri() + "#view=qk&layer=5&head=11&token=511",
                     wait_ms=0, wait_for=VIEW_DRAWN)
    assert view.page.locator("tr.rgv-qk-row").count() == 64
    requested = set(view.requested)
    assert {"qk-l5.js", "l5h11.js"} <= requested and not any(name.startswith("l0") for name in requested)
    rows = view.page.eval_on_selector_all("tr.rgv-qk-row",
                                          "els => els.map(e => [+e.dataset.softmax, +e.dataset.model])")
    check = view_files.read_page_payload(tmp_path / "site" / "example-1-qk.html")["check"]
    assert max(abs(soft - model) for soft, model in rows) <= check["difference"] <= check["rounding"]
    assert view.errors == [] and view.remote_requests == []


# -- patterns, nulls, per-example patterns, the glossary (issue 12) ----------------------------------------
