"""Hostile text (issue 10, section 2): no string a user controls runs in the browser.

One matrix: PAYLOADS (an HTML tag, attribute break-outs with either quote, a script end tag,
Markdown links and images to javascript:, attr_list attributes, a bare javascript: URL, a blank
line followed by Markdown and HTML) times FIELDS, every string a user controls: the config's
strings, example texts, the ablation data file (path, column names, texts, label cells and the
model's label names), the corpus (path, columns, texts), the model and comparison directories
and a file inside the model directory.

One build on a tiny random classifier, with every field carrying its own copy of each payload (ORDERS),
numbered `alert(<field><payload>)` so that a dialog or an attribute names the field and payload that got
through. Every page of the site is opened in Chromium from
file:// with a dialog listener: no dialog, no element with an on* attribute, no javascript:/data:/vbscript:
link or source, no script element holding a payload, no error; and each field's text shown
literally where the site displays it. site_url is a URL, not text: each payload, as a URL path
and as the whole value, is refused by the config (exit 2, naming the field) or, when it is a
valid address, lands escaped in every page's canonical link and in the sitemap.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from tests.helpers import CHARTS_DRAWN, ROOT, check_report, next_frames, wait_until

PAYLOADS = [
    "<img src=x onerror=alert({n})>",
    '"><svg onload=alert({n})>',
    "'><svg onload=alert({n})>",
    "</script><script>alert({n})</script>",
    "[c](javascript:alert({n}))",
    "![i](javascript:alert({n}))",
    "{{ onclick=alert({n}) }}",
    "{{: onmouseover=alert({n}) }}",
    "javascript:alert({n})",
    "**b**\n\n<script>alert({n})</script>",
]
FIELDS = [
    "title", "site_url", "output", "cache_dir", "model directory", "model file name",
    "example text", "example pair", "example name",
    "corpus path", "corpus column", "corpus pair column", "corpus texts",
    "ablation data path", "ablation text column", "ablation pair column", "ablation label column",
    "ablation texts", "label names", "compare model directory", "compare name",
]
LABELS = 2  # the classifier's labels: the hostile one and "plain"


def code(field: str, payload: int) -> int:
    """The number in alert(...): which field and which payload."""
    return 100 * (FIELDS.index(field) + 1) + payload


def decode(number: int) -> str:
    return f"{FIELDS[number // 100 - 1]} / payload {number % 100}"


def hostile(field: str, payload: int) -> str:
    return PAYLOADS[payload].format(n=code(field, payload))


# One build, every field carrying all ten payloads one after the other (each with its own number). Where a
# payload stands matters where Markdown or a link reads the start of a text differently: the HTML tag and the
# "javascript:" address each start the text of every other field (ORDERS, alternating down FIELDS), the Markdown
# paragraph with a script after a blank line ends it. One build says what ten did (a build and a browser tour
# each: ten took six minutes of the test run, two groups of five 276 s of CPU), and a dialog still names its
# field and payload. Each path component of a field's text stays under 255 bytes, a file name's limit (the
# script end tags' "/" make directories of path fields, as any "/" in a path does).
ORDERS = [(0, 1, 2, 3, 9, 8, 4, 5, 6, 7), (8, 4, 5, 6, 7, 0, 1, 2, 3, 9)]


def order_of(field: str) -> tuple[int, ...]:
    return ORDERS[FIELDS.index(field) % len(ORDERS)]


def hostile_text(field: str) -> str:
    return " ".join(hostile(field, k) for k in order_of(field))


def fold(text: str) -> str:
    """Whitespace as the pages show it (runs folded to one space)."""
    return " ".join(text.split())


def test_matrix_size():
    assert len(PAYLOADS) * len(FIELDS) == 210
    assert len({p.format(n=1) for p in PAYLOADS}) == len(PAYLOADS)
    assert all(sorted(order) == list(range(len(PAYLOADS))) for order in ORDERS)
    assert {order_of(field)[0] for field in FIELDS} == {0, 8}  # the HTML tag and the address each start some
    assert max(len(part.encode()) for field in FIELDS for part in hostile_text(field).split("/")) < 255 - 10


# -- the mechanism, without a build ---------------------------------------------------------------
def site_markdown():
    """Python-Markdown with the extensions of the site's mkdocs.yml, as MkDocs runs it."""
    import markdown

    extensions = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["markdown_extensions"]
    names = [e if isinstance(e, str) else next(iter(e)) for e in extensions]
    return markdown.Markdown(extensions=names)


# Every way a template places text in a page: a paragraph, a list item, a table cell, a raw
# HTML block, an attribute, an md_in_html block, a heading with an attr_list anchor.
CONTEXTS = [
    "{{ x }}\n",
    "Some text {{ x }}\n",
    "- {{ x }}\n",
    "| a | b |\n|---|---|\n| {{ x }} | {{ x }} |\n",
    '<table class="t">\n<tr><td>{{ x }}</td></tr>\n</table>\n',
    '<p class="t" title="{{ x }}">{{ x }}</p>\n',
    '<div class="t" markdown>\n\n**{{ x }}** [link](page.md#{{ anchor }})\n\n</div>\n',
    "## {{ x }} { #{{ anchor }} }\n",
    "Paragraph line\n{{ x }}\n",
]


@pytest.mark.parametrize("payload", [p.format(n=1) for p in PAYLOADS] + ["1. item", "---", "=== ", "# h", "> q",
                                                                         "a\x02wzxhzdk:0\x03b", "a\r\nb\x0cc"])
@pytest.mark.parametrize("context", CONTEXTS)
def test_templates_print_user_text_as_text(context, payload):
    """Whatever the template around it, a plain string reaches the HTML as the same text, and
    nothing else: no element, no attribute, no link comes from it."""
    from html.parser import HTMLParser

    from reportgen.site import pages

    env = pages.environment(ROOT / "site_src" / "templates")
    html = site_markdown().convert(env.from_string(context).render(x=payload, anchor="an-anchor"))

    class Collect(HTMLParser):
        def __init__(self):
            super().__init__(convert_charrefs=True)
            self.tags, self.text = [], []

        def handle_starttag(self, tag, attrs):
            self.tags.append((tag, dict(attrs)))

        def handle_data(self, data):
            self.text.append(data)

    parsed = Collect()
    parsed.feed(html)
    shown = fold(payload.replace("\x02", "\ufffd").replace("\x03", "\ufffd"))
    assert shown in fold("".join(parsed.text)), html
    template_tags = {"p", "ul", "li", "table", "thead", "tbody", "tr", "th", "td", "div", "strong", "a", "h2"}
    assert {tag for tag, _ in parsed.tags} <= template_tags, html
    for _tag, attrs in parsed.tags:
        assert set(attrs) <= {"class", "title", "id", "markdown", "href"}, html
        assert attrs.get("href") in (None, "page.md#an-anchor"), html
        assert attrs.get("id") in (None, "an-anchor"), html
        if "title" in attrs:
            assert attrs["title"] == fold(payload) or "\x02" in payload, html


def test_markup_and_numbers_pass_through():
    """What the site builds on purpose (Markup) and numbers print as they are."""
    from markupsafe import Markup

    from reportgen.site import pages

    env = pages.environment(ROOT / "site_src" / "templates")

    def render(source: str, **values) -> str:
        return env.from_string(source).render(**values)

    assert render("{{ m }}", m=Markup('<a href="x.md#a&b">x</a>')) == '<a href="x.md#a&b">x</a>'
    assert render("{{ i }} {{ f }} {{ n }}", i=-3, f=0.25, n=None) == "-3 0.25 None"
    assert render("{{ s }}", s="[c](javascript:alert(1))") == "&#91;c&#93;&#40;javascript:alert&#40;1&#41;&#41;"
    assert render("{{ xs }}", xs=["<b>"]) == "&#91;&#39;&#60;b&#62;&#39;&#93;"


def test_templates_use_no_escape_hatch():
    """No template marks text safe or renders it as Markdown itself: the environment is the one
    place where printed strings are made inert."""
    for template in (ROOT / "site_src" / "templates").glob("*.j2"):
        source = template.read_text(encoding="utf-8")
        for hatch in ("|safe", "| safe", "|md", "| md", "autoescape false", "Markup("):
            assert hatch not in source, (template.name, hatch)


@pytest.mark.parametrize("value, accepted", [
    ("https://user.github.io/project/", True),
    ("http://example.com", True),
    ("https://example.com/javascript:alert(1)/", True),
    ("javascript:alert(1)", False),
    ("JavaScript:alert(1)//https://x.org", False),
    ("data:text/html,<script>alert(1)</script>", False),
    ("https://example.com/x\"><img src=x onerror=alert(1)>", False),
    ("https://example.com/x'onmouseover='alert(1)", False),
    ("https://example.com/a b", False),
    ("https://example.com/a\tb", False),
    ("https://example.com/{onclick}", False),
    ("https://example.com/?q=1", False),
    ("https://example.com/#top", False),
    ("ftp://example.com/", False),
    ("//example.com/", False),
    ("example.com", False),
])
def test_site_url_is_an_http_address(tmp_path, value, accepted):
    from reportgen.config import load_config
    from reportgen.errors import EXIT_CONFIG, ConfigError

    path = tmp_path / "reportgen.yaml"
    path.write_text(yaml.safe_dump({"site_url": value}), encoding="utf-8")
    if accepted:
        assert load_config(path).site_url == value
        return
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert refused.value.exit_code == EXIT_CONFIG
    assert str(refused.value).startswith(f"{path}: field 'site_url': ")


@pytest.mark.parametrize("field", ["model", "output", "cache_dir", "ablation.data", "patterns.corpus.0.path",
                                   "compare.model"])
@pytest.mark.parametrize("url", ["javascript:alert(1)", " DATA:text/html,x", "vbscript:x"])
def test_script_urls_are_refused_in_location_fields(tmp_path, field, url):
    from reportgen.config import load_config
    from reportgen.errors import EXIT_CONFIG, ConfigError

    config = {"model": {"model": url}, "output": {"output": url}, "cache_dir": {"cache_dir": url},
              "ablation.data": {"ablation": {"data": url}}, "patterns.corpus.0.path": {"patterns": {"corpus": [
                  {"path": url}]}}, "compare.model": {"compare": {"model": url}}}[field]
    path = tmp_path / "reportgen.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert refused.value.exit_code == EXIT_CONFIG
    assert str(refused.value).startswith(f"{path}: field '{field}': ")


# -- the project ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def classifiers(tmp_path_factory) -> tuple[Path, Path]:
    """Two tiny random BERT classifiers (the model and the one it is compared with)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    from tests.helpers import TINY_WORDS

    root = tmp_path_factory.mktemp("hostile-models")
    made = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        target = root / f"classifier-{seed}"
        BertTokenizer(vocab={w: i for i, w in enumerate(TINY_WORDS)}).save_pretrained(target)
        BertForSequenceClassification(BertConfig(
            vocab_size=len(TINY_WORDS), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, max_position_embeddings=128, num_labels=LABELS)).save_pretrained(target)
        made.append(target)
    return made[0], made[1]


def place(source: Path, target: Path, label: str) -> None:
    """A copy of a classifier whose first label is `label`."""
    shutil.copytree(source, target)
    config = json.loads((target / "config.json").read_text(encoding="utf-8"))
    config["id2label"] = {"0": label, "1": "plain"}
    config["label2id"] = {label: 0, "plain": 1}
    (target / "config.json").write_text(json.dumps(config), encoding="utf-8")


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def project(root: Path, classifiers: tuple[Path, Path]) -> tuple[Path, dict[str, str], str | None]:
    """Files and config of the build: (config path, field -> its text, site_url used)."""
    text = {field: hostile_text(field) for field in FIELDS}
    label = text["label names"]
    place(classifiers[0], root / "models" / text["model directory"], label)
    place(classifiers[1], root / "compare" / text["compare model directory"], label)
    extra = root / "models" / text["model directory"] / f"{text['model file name']}.txt"
    extra.parent.mkdir(parents=True, exist_ok=True)
    extra.write_text("not part of the model\n", encoding="utf-8")
    columns = {"text": text["ablation text column"], "pair": text["ablation pair column"],
               "label": text["ablation label column"]}
    write_jsonl(root / "data" / f"{text['ablation data path']}.jsonl",
                [{columns["text"]: f"{text['ablation texts']} the cat {i}", columns["pair"]: "the dog sat",
                  columns["label"]: label if i % 2 else "plain"} for i in range(8)])
    write_jsonl(root / "corpus" / f"{text['corpus path']}.jsonl",
                [{text["corpus column"]: text["corpus texts"], text["corpus pair column"]: "the mat."}] * 2)
    (root / f"site-{text['output']}").parent.mkdir(parents=True, exist_ok=True)
    # site_url is a URL, not text: the first payload that makes a valid address.
    urls = [f"https://example.com/{hostile('site_url', k)}/" for k in order_of("site_url")]
    site_url = next((url for url in urls if accepted_site_url(url)), None)
    config = {
        "title": text["title"], "site_url": site_url, "model": f"./models/{text['model directory']}",
        "device": "cpu", "max_length": 64, "output": f"site-{text['output']}",
        "cache_dir": f"cache-{text['cache_dir']}",
        "examples": [{"text": text["example text"], "pair": text["example pair"], "name": text["example name"]}],
        "patterns": {"similarity": False, "corpus": [{
            "path": f"corpus/{text['corpus path']}.jsonl", "column": text["corpus column"],
            "pair_column": text["corpus pair column"]}]},
        "ablation": {"task": "classification", "data": f"data/{text['ablation data path']}.jsonl",
                     "columns": columns, "limit": 8, "seeds": [0], "fractions": [0.0], "bootstrap_samples": 100,
                     "permutations": 100, "experiments": {"baseline": True, "single_heads": False,
                                                          "random_fraction": False, "layer_halves": False,
                                                          "whole_layers": False, "importance": False}},
        "compare": {"model": f"./compare/{text['compare model directory']}", "name": text["compare name"]},
    }
    path = root / "payloads.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path, text, site_url


def accepted_site_url(url: str) -> bool:
    from reportgen.config import check_site_url

    try:
        check_site_url(url)
    except ValueError:
        return False
    return True


# -- what the browser sees --------------------------------------------------------------------------
# Every on* attribute; every URL-valued attribute that would run or embed content; every
# executable script whose code, outside its string literals, holds an alert( call.
FIND_ACTIVE = r"""() => {
  const found = [];
  const urlAttrs = ['href', 'src', 'action', 'formaction', 'xlink:href', 'poster', 'data', 'srcdoc', 'background'];
  for (const el of document.querySelectorAll('*')) {
    for (const a of el.attributes) {
      const name = a.name.toLowerCase();
      const value = a.value.replace(/[\s\u0000-\u001f]/g, '').toLowerCase();
      if (name.startsWith('on') || (urlAttrs.includes(name) && /^(javascript|data|vbscript):/.test(value)))
        found.push(`<${el.tagName.toLowerCase()} ${a.name}="${a.value}">`);
    }
  }
  const literals = /"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\]|\\.)*`/g;
  for (const s of document.querySelectorAll('script'))
    if ((!s.type || /javascript|module/i.test(s.type)) && s.textContent.replace(literals, '""').includes('alert('))
      found.push(`<script>${s.textContent.slice(0, 120)}`);
  return found;
}"""


def culprits(texts: list[str]) -> list[str]:
    """The fields named by the numbers in what fired (a dialog's message) or was found (alert(n))."""
    import re

    numbers = [int(n) for text in texts for n in re.findall(r"\d+", text) if int(n) >= 100]
    return sorted({decode(n) for n in numbers if n // 100 <= len(FIELDS)})


def visit(page, site: Path) -> dict[str, dict]:
    """Open every page of the site; return, per page, what fired, what was found and its text."""
    seen = {}
    for html in sorted(site.rglob("*.html")):
        name = html.relative_to(site).as_posix()
        page.dialogs.clear()
        page.errors.clear()
        page.page.goto(html.as_uri(), timeout=120_000)
        page.page.wait_for_load_state("load")  # every image loaded or failed: an onerror that would fire has fired
        wait_until(page.page, CHARTS_DRAWN, timeout=120_000)  # the charts rendered (any text they draw is in)
        next_frames(page.page)  # and the views drew their first frames (their handlers are attached)
        seen[name] = {"dialogs": list(page.dialogs), "active": page.page.evaluate(FIND_ACTIVE),
                      "errors": list(page.errors), "remote": list(page.remote_requests),
                      "title": page.page.title(), "text": page.page.evaluate("() => document.body.textContent")}
    return seen


def element_text(page, url: str, selector: str) -> str:
    page.page.goto(url, timeout=120_000)  # the patterns page draws ~50 charts: slow under a loaded CI
    return page.page.text_content(selector)


# over 60 s: a build with a comparison model, then every page of its site in a browser, checked for what ran
@pytest.mark.slow
# max_length 64 keeps every example's query/key page; the longest payloads are cut to it.
@pytest.mark.filterwarnings("ignore:example 1 was truncated to 64 tokens:UserWarning")
def test_payload_in_every_field_is_shown_literally_and_never_runs(tmp_path, classifiers, browser):
    from reportgen.config import load_config
    from reportgen.pipeline import build
    from tests.helpers import BrowserPage

    config_path, text, site_url = project(tmp_path, classifiers)
    for k in range(len(PAYLOADS)):
        check_site_url_refusals(tmp_path, k, site_url)
    build(load_config(config_path))
    site = tmp_path / f"site-{text['output']}"
    report = check_report(site)
    context = browser.new_context()
    try:
        page = BrowserPage(context.new_page())
        seen = visit(page, site)
        problems = {name: (s["dialogs"], s["active"]) for name, s in seen.items() if s["dialogs"] or s["active"]}
        assert not problems, (culprits([t for d, a in problems.values() for t in d + a]), problems)
        # 404.html links its assets from the site root (site_url's, when set), which file:// does not have.
        assert not {n: s["errors"] for n, s in seen.items() if s["errors"] and n != "404.html"}
        assert not {n: s["remote"] for n, s in seen.items() if s["remote"] and n != "404.html"}
        expected = {"index.html", "statistics.html", "patterns.html", "ablation.html", "compare.html", "examples.html",
                    "manifest.html", "example-1.html", "example-1-qk.html", "404.html"}
        assert expected <= set(seen)
        check_shown(page, site, seen, text, report)
        check_search_index(site)
        if site_url:
            check_site_url_escaped(site, seen, site_url)
    finally:
        context.close()


def check_shown(page, site: Path, seen: dict, text: dict[str, str], report: dict) -> None:
    """Each field's text, literally, at the main place the site shows it."""
    def shows(name: str, value: str, field: str) -> None:
        assert fold(value) in fold(seen[name]["text"]), (field, name, value)

    index = (site / "index.html").as_uri()
    assert element_text(page, index, ".rg-title") == fold(text["title"])
    assert page.page.text_content(".md-header__topic .rg-ellipsis").strip() == fold(text["title"])
    assert fold(text["title"]) in seen["index.html"]["title"] and fold(text["title"]) in seen["patterns.html"]["title"]
    example = (site / "example-1.html").as_uri()
    assert element_text(page, example, ".rg-example-name") == fold(text["example name"])
    texts = fold(page.page.text_content(".rg-texts"))
    assert fold(text["example text"]) in texts and fold(text["example pair"]) in texts
    for field in ("example text", "example pair", "example name"):
        shows("examples.html", text[field], field)
    # The model directory's name (its last path component: a payload with '/' is nested directories).
    model_name = report["model"]["name"]
    assert text["model directory"].rsplit("/", 1)[-1] in model_name
    shows("index.html", model_name, "model directory")
    shows("compare.html", text["compare name"], "compare name")
    shows("ablation.html", text["ablation data path"], "ablation data path")
    shows("manifest.html", f"{text['model file name']}.txt", "model file name")
    # The manifest prints the config as YAML: what it shows reads back as what was written.
    shown = yaml.safe_load(element_text(page, (site / "manifest.html").as_uri(), "pre.rg-config"))
    in_manifest = {
        "output": shown["output"], "cache_dir": shown["cache_dir"], "model directory": shown["model"],
        "corpus path": shown["patterns"]["corpus"][0]["path"],
        "corpus column": shown["patterns"]["corpus"][0]["column"],
        "corpus pair column": shown["patterns"]["corpus"][0]["pair_column"],
        "ablation data path": shown["ablation"]["data"], "ablation text column": shown["ablation"]["columns"]["text"],
        "ablation pair column": shown["ablation"]["columns"]["pair"],
        "ablation label column": shown["ablation"]["columns"]["label"],
        "compare model directory": shown["compare"]["model"], "compare name": shown["compare"]["name"],
        "title": shown["title"], "example text": shown["examples"][0]["text"],
    }
    for field, value in in_manifest.items():
        assert text[field] in value, (field, value)
    # Not displayed anywhere, so only the safety checks above apply: corpus texts, the ablation
    # data's texts and label cells, the model's label names.


def check_search_index(site: Path) -> None:
    """Material's search shows the index's text as HTML: user text is there escaped, never a tag."""
    from html.parser import HTMLParser

    class Tags(HTMLParser):
        def __init__(self):
            super().__init__()
            self.found = []

        def handle_starttag(self, tag, attrs):
            self.found.append((tag, [name for name, _ in attrs]))

    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    for doc in index["docs"]:
        for key in ("title", "text"):
            tags = Tags()
            tags.feed(doc[key])
            assert not [t for t in tags.found if t[0] in ("img", "svg", "script") or
                        any(a.startswith("on") for a in t[1])], (doc["location"], key, tags.found)


def check_site_url_refusals(root: Path, k: int, used: str | None) -> None:
    """site_url: the payload as a URL path, and as the whole value, is refused unless it is a valid address."""
    from reportgen.config import load_config
    from reportgen.errors import EXIT_CONFIG, ConfigError

    for value in (f"https://example.com/{hostile('site_url', k)}/", hostile("site_url", k)):
        if value == used:
            continue
        path = root / "site-url.yaml"
        path.write_text(yaml.safe_dump({"site_url": value}), encoding="utf-8")
        with pytest.raises(ConfigError) as refused:
            load_config(path)
        assert refused.value.exit_code == EXIT_CONFIG
        assert str(refused.value).startswith(f"{path}: field 'site_url': ") and "\n" not in str(refused.value)


def check_site_url_escaped(site: Path, seen: dict, site_url: str) -> None:
    """An accepted site_url is the canonical link of every page (attribute intact) and the sitemap's base."""
    for name in seen:
        if name == "404.html":
            continue
        html = (site / name).read_text(encoding="utf-8")
        assert f'<link rel="canonical" href="{site_url}{name}">' in html, name
    locations = [loc.text for loc in ET.parse(site / "sitemap.xml").getroot().iter()
                 if loc.tag.endswith("loc")]
    assert locations and all(loc.startswith(site_url) for loc in locations)
