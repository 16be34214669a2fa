/*
 * reportgen attention views: start-up. Finds every <div class="rgv" data-rgv="views|qk"> on the
 * page, reads its embedded payload and starts its widget; the first widget owns the URL hash
 * and follows its changes. Loaded last, after views-core.js and the widget files.
 */
(function (views) {
  'use strict';

  var owner = null;

  function readPayload(root) {
    var script = root.querySelector('script.rgv-data');
    if (!script) throw new Error('no <script class="rgv-data"> inside the view container');
    return JSON.parse(script.textContent);
  }

  function start(root, ownsHash) {
    var data = readPayload(root);
    return root.getAttribute('data-rgv') === 'qk' ? new views.QKWidget(root, data, ownsHash)
      : new views.ViewsWidget(root, data, ownsHash);
  }

  function init() {
    var roots = document.querySelectorAll('.rgv[data-rgv]');
    for (var i = 0; i < roots.length; i++) {
      var root = roots[i];
      if (root.getAttribute('data-rgv-init')) continue; // Material's document$ may call us again
      root.setAttribute('data-rgv-init', '1');
      var first = owner === null;
      try {
        var widget = start(root, first);
        if (first) owner = widget;
      } catch (err) {
        root.appendChild(views.el('p', 'rgv-error', 'The attention view could not be drawn: ' + err.message));
        throw err; // surface it in the console as well: a broken page should not pass quietly
      }
    }
  }

  // A link on the page to a view state (e.g. a head in "Patterns in this example") changes only
  // the hash: apply it and bring the view into sight. The widgets' own updates use replaceState,
  // which fires no hashchange, so using the controls never scrolls.
  // A link from another page (a finding's "view") lands on the view too, unless it opens the model
  // view at a layer, which scrolls to that row itself.
  function bringIntoSight() {
    var hash = location.hash;
    if (!owner || !owner.root.scrollIntoView || !/(^#|&)(view|layer|head|token)=/.test(hash)) return;
    if (/(^#|&)view=model(&|$)/.test(hash) && /(^#|&)layer=/.test(hash)) return;
    owner.root.scrollIntoView({ block: 'start' });
  }

  window.addEventListener('hashchange', function () {
    if (!owner) return;
    owner.applyHash(true);
    bringIntoSight();
  });

  function startPage() {
    init();
    bringIntoSight();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', startPage);
  else startPage();
  if (window.document$ && typeof window.document$.subscribe === 'function') window.document$.subscribe(init);
})(window.reportgenViews);
