/* Live reload for `reportgen serve --watch` (reportgen/commands/preview_server.py).
 *
 * The preview server adds this script (as a file of its own, /__reportgen__/live-reload.js) to every
 * HTML page it serves; the site's files never hold it.
 * It listens to the server's event stream. Each message is {"build": token, "error": line or null}:
 * a token other than the one this page was served with means a newer site, so the page reloads
 * (location.reload keeps the address, and with it the views' state in the hash); the same token with
 * an error means the last rebuild failed and this page is still the last good site, which a banner says.
 * The error is the build's own one-line message, possibly quoting user text: it is set as text
 * (textContent), never parsed as HTML. The page's Content-Security-Policy allows both: scripts and
 * connections from the page's own origin (script-src and connect-src 'self').
 */
(function () {
  "use strict";
  var script = document.currentScript;
  var served = script && script.getAttribute("data-build");
  var BANNER_ID = "reportgen-live-error";

  function showError(error) {
    var banner = document.getElementById(BANNER_ID);
    if (!error) {
      if (banner) banner.remove();
      return;
    }
    if (!banner) {
      banner = document.createElement("div");
      banner.id = BANNER_ID;
      banner.setAttribute("role", "alert");
      var look = banner.style;  // CSSOM, not a style attribute: allowed whatever the policy on styles
      look.position = "fixed";
      look.top = "0";
      look.left = "0";
      look.right = "0";
      look.zIndex = "10000";
      look.padding = "0.6em 1em";
      look.background = "#8b0000";
      look.color = "#fff";
      look.font = "14px/1.4 system-ui, sans-serif";
      look.whiteSpace = "pre-wrap";
      look.overflowWrap = "anywhere";
      look.boxShadow = "0 2px 6px rgba(0, 0, 0, 0.4)";
      document.body.appendChild(banner);
    }
    banner.textContent = "Rebuild failed: " + error + "\nThis is the last good site; save a fix to rebuild.";
  }

  if (!served || typeof EventSource === "undefined") return;
  var events = new EventSource("/__reportgen__/events");
  events.onmessage = function (message) {
    var state = JSON.parse(message.data);
    if (state.build !== served) {
      events.close();
      location.reload();
    } else {
      showError(state.error);
    }
  };
})();
