"""The picture cache of the site stage (reportgen.site.export_cache): a rebuild copies what it drew before,
byte for byte, and a damaged or missing entry is drawn again."""

from __future__ import annotations

import io
import os
import shutil
import threading
import time

import pytest
import vl_convert
from PIL import Image

from reportgen.cache.store import TEMP_NAME, Cache
from reportgen.config import load_config
from reportgen.errors import OutputError
from reportgen.pipeline import build
from reportgen.site import export_cache, exports
from reportgen.site.charts import head_map_svg, inline_svg
from reportgen.site.charts.head_map import Cell, HeadMap
from reportgen.site.export_cache import KIND, NO_CACHE, ExportCache, key_of
from tests.helpers import SMALL_ABLATION, tiny_config, tree, write_config

BAR = {"data": {"values": [{"a": "x", "b": 1}, {"a": "y", "b": 3}]}, "mark": "bar",
       "encoding": {"x": {"field": "a", "type": "nominal"}, "y": {"field": "b", "type": "quantitative"}},
       "config": {"font": "sans-serif"}}


class Drawer:
    """A draw function that counts its calls."""

    def __init__(self, payload: bytes = b"\x89PNG picture", pause: float = 0.0):
        self.payload, self.pause, self.calls = payload, pause, 0

    def __call__(self) -> bytes:
        self.calls += 1
        time.sleep(self.pause)
        return self.payload


@pytest.fixture(autouse=True)
def nothing_drawn_before(monkeypatch):
    """Every test starts with none of the pictures this process drew (export_cache.drawn): what a test reads
    back comes from the cache directory it checks."""
    monkeypatch.setattr(export_cache, "DRAWN", export_cache._Drawn(export_cache.MEMORY_BYTES))


def test_a_process_draws_a_picture_once_and_forgets_the_oldest_past_its_limit(monkeypatch):
    memory = export_cache._Drawn(limit=10)
    monkeypatch.setattr(export_cache, "DRAWN", memory)
    draw = Drawer(b"123456")
    assert export_cache.drawn(["a"], draw) == export_cache.drawn(["a"], draw) == b"123456" and draw.calls == 1
    assert export_cache.drawn(["b"], Drawer(b"7890")) == b"7890" and memory.size == 10
    export_cache.drawn(["a"], draw)  # used last: "b" is now the oldest
    export_cache.drawn(["c"], Drawer(b"xyz"))  # 13 bytes: "b" goes
    assert list(memory.items) == [key_of(["a"]), key_of(["c"])] and memory.size == 9 and draw.calls == 1
    export_cache.drawn(["big"], Drawer(b"x" * 11))  # over the limit alone: kept by no one
    assert memory.size <= 10 and key_of(["big"]) not in memory.items


def test_a_chart_exported_again_without_a_cache_directory_is_not_drawn_again(tmp_path, monkeypatch):
    calls = []
    for name in ("vegalite_to_svg", "svg_to_png"):
        original = getattr(vl_convert, name)
        monkeypatch.setattr(vl_convert, name, lambda *args, _f=original, _n=name, **kw: calls.append(_n) or _f(*args,
                                                                                                              **kw))
    chart = exports.Recorded("page", "bars", BAR, ("png", "svg"))
    exports.export_charts([chart], tmp_path / "first")
    exports.export_charts([chart], tmp_path / "second")
    assert sorted(calls) == ["svg_to_png", "vegalite_to_svg"]
    assert tree(tmp_path / "first") == tree(tmp_path / "second")


def test_a_second_ask_reads_the_entry_instead_of_drawing(tmp_path):
    cache, draw = ExportCache(tmp_path), Drawer()
    assert cache.get_bytes(["chart", BAR], "png", draw) == draw.payload
    assert cache.get_bytes(["chart", BAR], "png", draw) == draw.payload
    assert draw.calls == 1 and (cache.hits, cache.misses) == (1, 1)
    entry = tmp_path / KIND / f"{key_of(['chart', BAR])}.png"
    # The format every cache entry has (reportgen.cache.store): readable by Cache, its temp files swept by it.
    assert Cache(tmp_path).read_bytes(entry) == draw.payload
    assert TEMP_NAME.match(f"{entry.name}.tmp{os.getpid()}")
    assert [path.name for path in (tmp_path / KIND).iterdir()] == [entry.name]


def test_other_inputs_are_another_entry(tmp_path):
    cache = ExportCache(tmp_path)
    cache.get_bytes(["chart", 2, BAR], "png", Drawer(b"two"))
    assert cache.get_bytes(["chart", 1, BAR], "png", Drawer(b"one")) == b"one"
    assert cache.get_text(["chart", BAR], "svg", lambda: "<svg>é</svg>") == "<svg>é</svg>"
    assert len(list((tmp_path / KIND).iterdir())) == 3 and cache.misses == 3


def test_no_directory_draws_every_time_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    draw = Drawer()
    for cache in (NO_CACHE, ExportCache(None), NO_CACHE):
        assert cache.get_bytes(["chart", BAR], "png", draw) == draw.payload
    assert draw.calls == 3 and not list(tmp_path.iterdir())


@pytest.mark.slow  # draws a chart with vl-convert (seconds)
def test_a_damaged_entry_is_warned_about_and_drawn_again(tmp_path):
    cache, draw = ExportCache(tmp_path), Drawer()
    cache.get_bytes(["x"], "png", draw)
    entry = next((tmp_path / KIND).iterdir())
    entry.write_bytes(entry.read_bytes()[:-3] + b"BAD")
    with pytest.warns(UserWarning, match="damaged"):
        assert cache.get_bytes(["x"], "png", draw) == draw.payload
    assert draw.calls == 2 and Cache(tmp_path).read_bytes(entry) == draw.payload  # rewritten whole


def test_what_cannot_be_an_entry_is_one_line_not_a_traceback(tmp_path):
    cache = ExportCache(tmp_path)
    key = key_of(["x"])
    (tmp_path / KIND / f"{key}.png").mkdir(parents=True)
    with pytest.raises(OutputError, match="is a directory, not a file; delete it"):
        cache.get_bytes(["x"], "png", Drawer())
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache directory should be")
    with pytest.raises(OutputError, match="is a file, not a directory"):
        ExportCache(blocked).get_bytes(["x"], "png", Drawer())


def test_threads_asking_for_one_picture_draw_it_once(tmp_path):
    cache, draw = ExportCache(tmp_path), Drawer(pause=0.2)
    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.get_bytes(["x"], "png", draw)))
               for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [draw.payload] * 3 and draw.calls == 1 and (cache.hits, cache.misses) == (2, 1)


def _pixels(png: bytes) -> tuple[tuple[int, int], bytes]:
    image = Image.open(io.BytesIO(png)).convert("RGBA")
    return image.size, image.tobytes()


@pytest.mark.slow  # over half a second: the fast tier stays under a minute
def test_chart_exports_come_from_the_cache_byte_for_byte(tmp_path):
    grid = exports.side_by_side([BAR, BAR])
    charts = [exports.Recorded("page", "bar", BAR, exports.FORMATS),
              exports.Recorded("page", "grid", grid, exports.GRID_FORMATS),
              exports.Recorded("page", "same", BAR, exports.FORMATS)]  # the same picture under another name
    cold, warm, plain = ExportCache(tmp_path / "cache"), ExportCache(tmp_path / "cache"), tmp_path / "plain"
    exports.export_charts(charts, tmp_path / "cold", cache=cold)
    exports.export_charts(charts, tmp_path / "warm", cache=warm)
    exports.export_charts(charts, plain)
    assert (cold.misses, cold.hits) == (3, 2)  # bar's PNG and SVG, the grid's PNG; "same" is bar's
    assert (warm.misses, warm.hits) == (0, 5)
    assert tree(tmp_path / "cold") == tree(tmp_path / "warm") == tree(plain)
    expected = [f"page--{name}.{fmt}" for name in ("bar", "same") for fmt in exports.FORMATS]
    assert sorted(tree(plain)) == sorted([*expected, "page--grid.csv", "page--grid.png"])


@pytest.mark.slow  # over 0.3 s (--durations): the fast tier stays under a minute
def test_a_png_drawn_from_the_exported_svg_has_vega_s_own_pixels(tmp_path):
    """The PNG of a chart that is exported as SVG too is rasterised from that SVG (one Vega pass, not two):
    the same pixels as vl-convert's own PNG of the spec."""
    exports.export_charts([exports.Recorded("page", "bar", BAR, exports.FORMATS)], tmp_path)
    own = vl_convert.vegalite_to_png(BAR, scale=exports.PNG_SCALE)
    assert _pixels((tmp_path / "page--bar.png").read_bytes()) == _pixels(own)


def _head_map(labels: list[str]) -> HeadMap:
    cells = [Cell(layer=0, head=head, label=label, statistic=None, value=None, entropy=1.0, effective_share=0.5,
                  masking=None, link=f"example-1.html#view=head&layer=0&head={head}")
             for head, label in enumerate(labels)]
    return HeadMap(id="head-map", model="tiny", scope="inputs", layers=1, heads=len(labels), metric=None,
                   cells=cells)


@pytest.mark.slow  # over 0.3 s (--durations): the fast tier stays under a minute
def test_inline_pictures_and_head_map_pngs_come_from_the_cache(tmp_path):
    cache = ExportCache(tmp_path)
    first = inline_svg.svg(BAR, "rg-pic-a", "A bar chart", cache)
    assert str(inline_svg.svg(BAR, "rg-pic-a", "A bar chart", cache)) == str(first)
    assert str(inline_svg.svg(BAR, "rg-pic-a", "A bar chart")) == str(first)  # as drawn without a cache
    assert 'aria-label="Its label"' in inline_svg.svg(BAR, "rg-pic-a", "Its label", cache)  # part of the key
    assert (cache.hits, cache.misses) == (1, 2)
    drawn = _head_map(["previous_token", "mixed"])
    png = head_map_svg.png(drawn, cache)
    assert head_map_svg.png(drawn, cache) == png == head_map_svg.png(drawn)
    assert head_map_svg.png(_head_map(["delimiter", "mixed"]), cache) != png  # another drawing, another entry
    assert (cache.hits, cache.misses) == (2, 4) and Image.open(io.BytesIO(png)).size == (1200, 630)


# A tiny site built twice: its pictures must come from the cache the second time.
TINY = {"title": "Tiny cached pictures", "ablation": {**SMALL_ABLATION, "limit": 24}}


@pytest.mark.slow
def test_a_warm_rebuild_draws_nothing_and_writes_the_cold_build_s_bytes(tmp_path, tiny_model, monkeypatch):
    write_config(tmp_path, tiny_config(tiny_model, **TINY))
    config = load_config(tmp_path / "reportgen.yaml")
    build(config, out=tmp_path / "cold", reproducible=True)
    entries = tree(config.cache_dir / KIND)
    assert entries and all(name.rsplit(".", 1)[1] in ("png", "svg", "js") for name in entries)

    def no_drawing(*_args, **_kwargs):
        raise AssertionError("a picture was drawn although the cache had it")

    for name in ("vegalite_to_png", "vegalite_to_svg", "svg_to_png", "javascript_bundle"):
        monkeypatch.setattr(vl_convert, name, no_drawing)
    build(config, out=tmp_path / "warm", reproducible=True)
    assert tree(tmp_path / "warm") == tree(tmp_path / "cold")
    assert tree(config.cache_dir / KIND) == entries
    assert 'class="rg-picture"' in (tmp_path / "warm" / "index.html").read_text()  # pictures were taken


@pytest.mark.slow
def test_a_site_built_with_the_cache_is_the_site_built_without(tmp_path, tiny_model, monkeypatch):
    """Tests and scripts call write_site without a cache directory: the same site, drawn anew."""
    from reportgen.site import writer

    write_config(tmp_path, tiny_config(tiny_model, **TINY))
    config = load_config(tmp_path / "reportgen.yaml")
    build(config, out=tmp_path / "cached", reproducible=True)
    shutil.rmtree(config.cache_dir / KIND)
    original = writer.write_site
    monkeypatch.setattr(writer, "write_site", lambda *args: original(*args[:5]))  # the cache dir left out
    build(config, out=tmp_path / "plain", reproducible=True)
    assert tree(tmp_path / "plain") == tree(tmp_path / "cached")
    assert not (config.cache_dir / KIND).exists()  # without a cache directory, nothing is kept
