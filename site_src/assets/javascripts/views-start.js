/*
 * reportgen attention views: start-up. Finds every <div class="rgv" data-rgv="views|qk"> on the
 * page, reads its embedded payload and starts its widget; the first widget owns the URL hash
 * and follows its changes. Also puts the example pages' skip link to the views first in the tab
 * order. Loaded last of the views' files, after views-core.js and the widget files.
 */
(function (views) {
  'use strict';

  var owner = null;

  // The payload inside the view's element, or the one it names in data-rgv-source (a page that shows several
  // views of one input: reportgen/site/standalone.py).
  function readPayload(root) {
    var source = root.getAttribute('data-rgv-source');
    var script = source ? document.getElementById(source) : root.querySelector('script.rgv-data');
    if (!script) throw new Error('no <script class="rgv-data"> for the view container');
    return JSON.parse(script.textContent);
  }

  function start(root, ownsHash) {
    var data = readPayload(root);
    if (root.getAttribute('data-rgv') !== 'qk') return new views.ViewsWidget(root, data, ownsHash);
    // A combined payload (reportgen/site/views.py combined_payload) keeps the query/key data under "qk".
    return new views.QKWidget(root, data.qk ? Object.assign({}, data, data.qk, { kind: 'qk' }) : data, ownsHash);
  }

  // Starts every view not started yet. The first view of a page owns the URL hash, unless it says
  // data-rgv-hash="off" (a notebook's views: the notebook's address is not theirs).
  function init() {
    var roots = document.querySelectorAll('.rgv[data-rgv]');
    for (var i = 0; i < roots.length; i++) {
      var root = roots[i];
      if (root.getAttribute('data-rgv-init')) continue; // Material's document$ may call us again
      root.setAttribute('data-rgv-init', '1');
      var waiting = root.querySelector('.rgv-needs-js'); // a notebook output's words for when scripts do not run
      if (waiting) waiting.remove();
      var first = owner === null && root.getAttribute('data-rgv-hash') !== 'off';
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

  // ------------------------------------------------------------- skip link

  // On a page with the views under an "Attention" heading (an example page), the first Tab stop is a
  // link that skips the header, the navigation and the page's text to the views (issue 28), before
  // Material's own "Skip to content". Styled as Material's (.md-skip: shown only while focused).
  function addSkipLink() {
    var target = document.getElementById('attention');
    var home = document.querySelector('[data-md-component="skip"]');
    if (!target || !home || !document.querySelector('.rgv[data-rgv]') || home.querySelector('.rg-skip-views')) return;
    var link = views.el('a', 'md-skip rg-skip-views', 'Skip to the attention view');
    link.href = '#attention';
    // Lands on the view's first control, with its heading in sight: following the anchor alone would leave the
    // heading's permalink as the next Tab stop, and the hash the views read would name a heading.
    link.addEventListener('click', function (event) {
      var first = document.querySelector('.rgv[data-rgv] button, .rgv[data-rgv] select, .rgv[data-rgv] a[href]');
      if (!first) return; // not drawn: the anchor still scrolls there
      event.preventDefault();
      if (target.scrollIntoView) target.scrollIntoView({ block: 'start' });
      first.focus({ preventScroll: true });
    });
    home.insertBefore(link, home.firstChild);
  }

  function startPage() {
    addSkipLink();
    init();
    bringIntoSight();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', startPage);
  else startPage();
  if (window.document$ && typeof window.document$.subscribe === 'function') {
    window.document$.subscribe(function () {
      addSkipLink();
      init();
    });
  }
  views.startAll = init; // a notebook output that arrives after the page loaded starts its views with this
})(window.reportgenViews);
