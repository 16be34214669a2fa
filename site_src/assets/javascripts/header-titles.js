// Material makes tooltips of text read as HTML: of every `[title]` in the header (the logo's is the
// site title, user text), and of every `.md-ellipsis` that overflows (the header's title, navigation
// and contents entries). A title such as `<img src=x onerror=...>` would run. So, before Material's
// bundle looks for them (this file is loaded just before it, overrides/main.html), the ellipses keep
// their look under another class (reportgen.css .rg-ellipsis), with a title where they are cut (always
// in the header, whose width changes as the page loads), and the header's titles are handed to
// Material as HTML: escaped. A file, not an inline script, so that the pages' CSP needs no hash for it.
(function () {
  "use strict";
  var labels = Array.prototype.slice.call(document.querySelectorAll(".md-ellipsis"));
  var cut = labels.map(function (label) {
    return label.scrollWidth > label.offsetWidth || label.closest("[data-md-component=header]") !== null;
  });
  labels.forEach(function (label, index) {
    label.classList.replace("md-ellipsis", "rg-ellipsis");
    if (cut[index]) (label.closest("a") || label).title = label.textContent.trim();
  });
  document.querySelectorAll("[data-md-component=header] [title]").forEach(function (element) {
    element.title = element.title.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  });
})();
