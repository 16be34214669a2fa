// Draws every Vega-Lite chart of a page. Specs sit inline in
// <script type="application/json" data-rg-chart="ID"> next to <div id="ID">,
// because fetch() is blocked on file:// pages.
(function () {
  "use strict";

  var EMBED_OPTIONS = {
    actions: false, // downloads are offered as files written at build time
    renderer: "svg",
    // The pages' Content-Security-Policy (overrides/main.html) allows no eval and no inline style:
    // Vega's expressions run in its interpreter (ast), not compiled with Function(), and neither
    // vega-embed nor its tooltip adds a <style> element (reportgen.css styles both instead).
    ast: true,
    defaultStyle: false,
    tooltip: { disableDefaultStyle: true },
    // A chart item with an href (reportgen/site/charts/vegalite.py `links`) opens it in this tab, as every other
    // link of the site does: Vega follows it through an <a> with the loader's target.
    loader: { target: "_self" },
  };

  // A chart is laid out for the width its page gives it (issue 28), never shrunk to fit: its text keeps
  // the size the spec gives it (reportgen/site/charts/vegalite.py CONFIG). It is drawn as its spec says
  // and, where that is wider than its box, drawn again as wide as the box in the spec's own narrow
  // layout (usermeta.narrow, vegalite.py `narrow`): legend under the plot, title in lines, fewer ticks.
  // A chart that cannot be narrower than its usermeta.narrow.minWidth (labelled bands) keeps that width
  // and scrolls sideways in its box (charts.css .rg-chart-scrolls). target.rgView is set once it is laid out.
  function available(target) {
    var box = target.parentElement, style = window.getComputedStyle(box);
    return box.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  }

  function merged(base, over) {
    var out = Object.assign({}, base);
    Object.keys(over).forEach(function (key) {
      var both = over[key] && base[key] && typeof over[key] === "object" && typeof base[key] === "object";
      out[key] = both ? Object.assign({}, base[key], over[key]) : over[key];
    });
    return out;
  }

  function narrowed(spec, width) {
    var layout = (spec.usermeta || {}).narrow;
    if (!layout) return null;
    var out = Object.assign({}, spec, {width: Math.max(Math.floor(width), layout.minWidth || 0),
                                       autosize: {type: "fit-x", contains: "padding"}});
    if (layout.title) out.title = layout.title;
    out.config = merged(spec.config || {}, layout.config || {});
    return out;
  }

  // What every chart of the page shares, written once (<script data-rg-chart-defaults>, reportgen/site/pages.py
  // _page_spec): its $schema, config and narrow layout's config, given back to each spec that lacks them.
  var defaults = null;
  function withDefaults(spec) {
    if (defaults === null) {
      var script = document.querySelector("script[data-rg-chart-defaults]");
      defaults = script ? JSON.parse(script.textContent) : {};
    }
    var out = Object.assign({}, spec);
    if (!out.$schema && defaults.$schema) out.$schema = defaults.$schema;
    if (!out.config && defaults.config) out.config = defaults.config;
    var narrow = (out.usermeta || {}).narrow;
    if (narrow && !narrow.config && defaults.narrow) {
      out.usermeta = Object.assign({}, out.usermeta, { narrow: Object.assign({}, narrow, { config: defaults.narrow }) });
    }
    return out;
  }

  function drawnWidth(target) {
    var svg = target.querySelector("svg");
    return svg ? parseFloat(svg.getAttribute("width")) : 0;
  }

  function layOut(target, spec) {
    var width = available(target);
    target.rgWidth = width;
    target.classList.remove("rg-chart-scrolls");
    target.removeAttribute("tabindex");
    return window.vegaEmbed(target, spec, EMBED_OPTIONS).then(function (result) {
      // A box with no width (a closed <details>, a hidden tab) has nothing to lay out for: drawn as it is.
      var narrow = width > 0 && drawnWidth(target) > width + 0.5 ? narrowed(spec, width) : null;
      if (!narrow) return result;
      // A height of so many pixels a row becomes the height it was drawn at: Vega-Lite cannot fit a chart to a
      // width while one of its sizes is a step (it warns and drops "fit-y"), and the rows keep their size.
      if (narrow.height && narrow.height.step) narrow.height = result.view.height();
      result.finalize();
      return window.vegaEmbed(target, narrow, EMBED_OPTIONS);
    }).then(function (result) {
      if (width > 0 && drawnWidth(target) > width + 0.5) {
        target.classList.add("rg-chart-scrolls");
        target.tabIndex = 0; // a box that scrolls is scrolled from the keyboard too (axe scrollable-region-focusable)
      }
      // A layer with nothing to draw (every value undefined: a metric of 0 has no relative change) is an
      // empty mark group that Vega still gives a graphics role; it shows nothing, so it has nothing to name.
      target.querySelectorAll("g.role-mark[role]").forEach(function (group) {
        if (!group.childElementCount) group.setAttribute("aria-hidden", "true");
      });
      target.rgView = result.view; // kept for tests and for linking cells
    }).catch(function (err) {
      target.textContent = "This chart could not be drawn: " + err.message;
    });
  }

  // Charts are drawn one at a time, those on or near the screen first, the rest in the background, each in
  // its own task: a page of 48 charts (the patterns page) opens, scrolls and follows links at once instead of
  // after every chart is drawn, and a link to a section further down draws that section's charts first.
  // <html data-rg-charts="drawn"> says every chart is laid out (tests wait for it).
  var waiting = [], near = new Set();
  var watcher = "IntersectionObserver" in window ? new IntersectionObserver(function (entries) {
    entries.forEach(function (entry) {
      if (entry.isIntersecting) near.add(entry.target); else near.delete(entry.target);
    });
  }, { rootMargin: "100% 0px" }) : null;

  function nextTarget() {
    var index = waiting.findIndex(function (target) { return near.has(target); });
    return waiting.splice(index < 0 ? 0 : index, 1)[0];
  }

  function drawNext() {
    var target = nextTarget();
    if (!target) {
      document.documentElement.dataset.rgCharts = "drawn";
      return;
    }
    if (watcher) watcher.unobserve(target);
    near.delete(target);
    target.rgSpec = withDefaults(JSON.parse(target.rgSpecText));
    layOut(target, target.rgSpec).then(function () { window.setTimeout(drawNext, 0); });
  }

  function drawAll() {
    if (typeof window.vegaEmbed !== "function") return;
    document.querySelectorAll("script[data-rg-chart]").forEach(function (script) {
      var target = document.getElementById(script.getAttribute("data-rg-chart"));
      if (!target || target.dataset.rgDrawn) return;
      target.dataset.rgDrawn = "1";
      target.rgSpecText = script.textContent;
      waiting.push(target);
      if (watcher) watcher.observe(target);
    });
    // The observer reports what is on screen in its first callback, before the next task.
    window.setTimeout(drawNext, 0);
  }

  // Each chart under `root` whose box changed width since it was laid out, laid out again.
  function layOutAgain(root) {
    root.querySelectorAll(".rg-chart").forEach(function (target) {
      if (target.rgView && target.rgSpec && Math.abs(available(target) - target.rgWidth) > 1) {
        target.rgView.finalize();
        target.rgView = null;
        layOut(target, target.rgSpec);
      }
    });
  }

  // A screen turned or a window resized: each chart whose box changed width is laid out again.
  var resizing = null;
  window.addEventListener("resize", function () {
    window.clearTimeout(resizing);
    resizing = window.setTimeout(function () { layOutAgain(document); }, 250);
  });
  // A <details> opened (the patterns page's attention matrices, collapsed until asked for): its charts were drawn
  // with no box to fit, and fit it now. "toggle" does not bubble: it is caught on its way down.
  document.addEventListener("toggle", function (event) {
    if (event.target.open) layOutAgain(event.target);
  }, true);

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawAll);
  } else {
    drawAll();
  }
})();

// "Copy link" next to a chart or finding: the page address with that element's anchor.
// The copying itself is shared with the attention views (views-core.js, loaded before this file).
document.addEventListener("click", function (event) {
  var button = event.target.closest && event.target.closest("button.rg-copy-link");
  if (!button) return;
  var views = window.reportgenViews;
  var link = views.linkTo(button.getAttribute("data-anchor"));
  views.copyLink(link, function () { button.textContent = "Link copied"; }, function () {
    window.prompt("Copy this link:", link);
  });
  button.setAttribute("data-link", link);
});
