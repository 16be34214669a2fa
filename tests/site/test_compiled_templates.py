"""MkDocs makes a new Jinja environment for every site; reportgen.site.mkdocs_site keeps the theme's compiled
templates for the process, so a build's second write (and the next build) does not compile Material again.
Real Material templates and a template of our own in a temporary theme folder; no site is built."""

from __future__ import annotations

import jinja2
from mkdocs.theme import Theme

from reportgen.site import mkdocs_site


def compiled_by(theme: Theme, names: list[str], monkeypatch) -> list[str]:
    """The templates a fresh environment of `theme` compiles to load `names`."""
    compiled: list[str] = []
    compile_ = jinja2.Environment.compile

    def counting(self, source, name=None, filename=None, raw=False, defer_init=False):
        compiled.append(name)
        return compile_(self, source, name, filename, raw, defer_init)

    with monkeypatch.context() as patch:
        patch.setattr(jinja2.Environment, "compile", counting)
        env = theme.get_env()
        for name in names:
            env.get_template(name)
    return compiled


def test_a_second_environment_reuses_the_compiled_templates_and_an_edit_is_compiled_anew(tmp_path, monkeypatch):
    monkeypatch.setattr(mkdocs_site, "_COMPILED", {})
    (tmp_path / "ours.html").write_text("{{ 1 + 1 }} first", encoding="utf-8")
    theme = Theme(name="material", custom_dir=str(tmp_path))
    mkdocs_site._keep_compiled_templates(theme)
    names = ["main.html", "404.html", "ours.html"]
    first = compiled_by(theme, names, monkeypatch)
    assert sorted(first) == sorted(names)
    assert compiled_by(theme, names, monkeypatch) == []
    (tmp_path / "ours.html").write_text("{{ 2 + 2 }} second", encoding="utf-8")
    assert compiled_by(theme, names, monkeypatch) == ["ours.html"]
    assert theme.get_env().get_template("ours.html").render() == "4 second"
    # a theme object of MkDocs' own, never given the cache, compiles everything each time
    plain = Theme(name="material", custom_dir=str(tmp_path))
    assert compiled_by(plain, ["ours.html"], monkeypatch) == ["ours.html"]
