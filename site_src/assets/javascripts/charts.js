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

  function drawAll() {
    if (typeof window.vegaEmbed !== "function") return;
    document.querySelectorAll("script[data-rg-chart]").forEach(function (script) {
      var target = document.getElementById(script.getAttribute("data-rg-chart"));
      if (!target || target.dataset.rgDrawn) return;
      target.dataset.rgDrawn = "1";
      window.vegaEmbed(target, JSON.parse(script.textContent), EMBED_OPTIONS).then(function (result) {
        target.rgView = result.view; // kept for tests and for linking cells
      }).catch(function (err) {
        target.textContent = "This chart could not be drawn: " + err.message;
      });
    });
  }

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
