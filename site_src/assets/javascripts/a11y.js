// What screen-reader and keyboard users need that the theme's markup lacks, set once the page is there.
// - Material's search is a dialog (role="dialog") without a name: it is named "Search".
// - A region that scrolls sideways (a wide table on a phone) must be reachable from the keyboard to be
//   scrolled without a mouse (axe scrollable-region-focusable): each one that overflows gets a tab stop
//   and a name; the check runs again when the window's width changes.
(function () {
  "use strict";
  var SCROLLERS = ".md-typeset .rg-table, .md-typeset .md-typeset__scrollwrap, .md-typeset .rg-scroll";

  function nameSearch() {
    document.querySelectorAll(".md-search[role=dialog]:not([aria-label])").forEach(function (dialog) {
      dialog.setAttribute("aria-label", "Search");
    });
  }

  function markScrollers() {
    document.querySelectorAll(SCROLLERS).forEach(function (region) {
      var scrolls = region.scrollWidth > region.clientWidth + 1;
      if (scrolls && !region.hasAttribute("tabindex")) {
        region.setAttribute("tabindex", "0");
        region.setAttribute("role", "region");
        var caption = region.querySelector("caption");
        region.setAttribute("aria-label", (caption ? caption.textContent.trim() + " " : "") + "(scrolls sideways)");
        region.dataset.rgScrolls = "1";
      } else if (!scrolls && region.dataset.rgScrolls) {
        ["tabindex", "role", "aria-label", "data-rg-scrolls"].forEach(function (name) { region.removeAttribute(name); });
      }
    });
  }

  function start() {
    nameSearch();
    markScrollers();
    var pending = 0;
    window.addEventListener("resize", function () {
      cancelAnimationFrame(pending);
      pending = requestAnimationFrame(markScrollers);
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
