/*
 * reportgen attention views: the query/key view of a long input (issue 46). A table of a thousand keys, each with
 * two strips of vector cells, is not one anybody reads, so past views.QK_PAGE tokens (views-qk.js) the table lists
 * a page of keys at a time (qkShownKeys): by default the keys the query weighs most, largest first, or any range
 * of them from the "Keys" menu; and the strip of query tokens shows a page of them, with buttons to the pages
 * before and after (a link's token opens its page). Short inputs never run this: a single file of one leaves it
 * out (reportgen/site/standalone.py). Needs views-core.js and views-qk.js first.
 */
(function (views) {
  'use strict';

  /*
   * The keys a query/key table lists: every key up to `page` of them; past that, `page` at a time: `choice`
   * 'top' the keys this query's `softmax` weighs most, largest first (ties in key order), or a number p the keys
   * p * page .. (p + 1) * page - 1.
   */
  function qkShownKeys(softmax, n, choice, page) {
    if (n > page && choice === 'top') return views.pickKeys(softmax, n, 0, page, -Infinity, function () { return true; });
    var start = n > page ? Math.max(0, Math.min(choice * page, n - 1)) : 0;
    return views.range(Math.min(n, start + (n > page ? page : n)) - start).map(function (i) { return start + i; });
  }
  views.qkShownKeys = qkShownKeys;
  if (!views.QKWidget) return; // Node's tests: the pure function only

  var proto = views.QKWidget.prototype;
  var el = views.el;

  // The choice of keys: the QK_PAGE the query weighs most, or a range of QK_PAGE.
  proto.buildKeyChoice = function () {
    var self = this;
    var page = views.QK_PAGE;
    var options = [['top', 'the ' + page + ' it weighs most']];
    for (var at = 0; at < this.n; at += page) options.push([at / page, '#' + at + '\u2013' + (Math.min(this.n, at + page) - 1)]);
    this.keySelect = views.selectOf('rgv-qk-keys', options);
    this.keySelect.addEventListener('change', function () {
      self.keyChoice = self.keySelect.value === 'top' ? 'top' : parseInt(self.keySelect.value, 10);
      self.render(true);
    });
    return this.keySelect;
  };

  // The buttons to the query tokens before and after the strip's, and which the strip shows.
  proto.buildPager = function () {
    var self = this;
    var pager = views.group('rgv-qk-pager', 'query tokens shown');
    this.earlier = pager.appendChild(views.button('rgv-qk-page', '\u2039 earlier', 'the query tokens before these'));
    this.stripLabel = pager.appendChild(el('span', 'rgv-qk-page-label'));
    this.later = pager.appendChild(views.button('rgv-qk-page', 'later \u203a', 'the query tokens after these'));
    this.earlier.addEventListener('click', function () { self.showStrip(self.stripPage - 1); });
    this.later.addEventListener('click', function () { self.showStrip(self.stripPage + 1); });
    return pager;
  };

  // [first, end) of the strip's page `page` (kept within the input), its label and buttons set.
  proto.stripRange = function (page) {
    var pages = Math.ceil(this.n / views.QK_PAGE);
    this.stripPage = Math.max(0, Math.min(pages - 1, page));
    var first = this.stripPage * views.QK_PAGE;
    var end = Math.min(this.n, first + views.QK_PAGE);
    this.stripLabel.textContent = 'query tokens #' + first + '\u2013' + (end - 1) + ' of ' + this.n;
    this.earlier.disabled = this.stripPage === 0;
    this.later.disabled = this.stripPage === pages - 1;
    return [first, end];
  };

  // Before a render: the strip on the query's page, the menu on the keys chosen.
  proto.followQuery = function () {
    var page = Math.floor(this.state.token / views.QK_PAGE);
    if (page !== this.stripPage) this.showStrip(page);
    this.keySelect.value = String(this.keyChoice);
  };

  // What the table leaves out, and how to see it.
  proto.shownText = function (shown) {
    var which = this.keyChoice === 'top' ? 'the ' + shown.length + ' keys this query weighs most, largest first'
      : 'keys #' + shown[0] + '\u2013' + shown[shown.length - 1];
    return ' The table lists ' + which + ', of ' + this.n + ': the Keys menu shows the others.';
  };
})(typeof window !== 'undefined' ? window.reportgenViews : require('./views-core.js')); // Node: the same object
