/*
 * reportgen attention views: the head view, as in bertviz (Vig 2019, "A Multiscale
 * Visualization of Attention in the Transformer Model"): the tokens twice, attending on the
 * left and attended on the right, joined by one line per weight in the head's colour.
 * Adds the stage methods to ViewsWidget.prototype (views-widget.js, loaded first).
 */
(function (views) {
  'use strict';

  var el = views.el;
  var ROW_H = 20; // px per token row; lines start and end at row centres
  var LINES_W = 220; // px between the two token columns
  var proto = views.ViewsWidget.prototype;

  // The head view: token columns (HTML, so text stays text) around an SVG of lines.
  proto.buildStage = function () {
    var stage = el('div', 'rgv-stage');
    stage.style.setProperty('--rgv-row', ROW_H + 'px');
    this.left = el('div', 'rgv-col rgv-left');
    this.right = el('div', 'rgv-col rgv-right');
    this.leftRows = this.fillColumn(this.left, 'q');
    this.rightRows = this.fillColumn(this.right, 'k');
    this.svg = views.svgEl('svg', {
      class: 'rgv-lines',
      width: LINES_W,
      height: this.n * ROW_H,
      viewBox: '0 0 ' + LINES_W + ' ' + this.n * ROW_H,
      'aria-hidden': 'true',
    });
    stage.appendChild(this.left);
    stage.appendChild(this.svg);
    stage.appendChild(this.right);
    return stage;
  };

  // One row per token in `column`, numbers on the side facing the lines; `which` is 'q' (left) or 'k' (right).
  proto.fillColumn = function (column, which) {
    var self = this;
    var rows = this.data.tokens.map(function (tok, i) {
      var row = el('div', 'rgv-tok');
      row.setAttribute('data-i', String(i));
      row.setAttribute('data-group', self.groups[i]);
      if (self.data.special[i]) row.classList.add('rgv-special');
      var text = el('span', 'rgv-tok-text', tok);
      text.title = '#' + i + ' ' + tok;
      var nums = el('span', 'rgv-nums');
      row.appendChild(which === 'q' ? nums : text);
      row.appendChild(which === 'q' ? text : nums);
      column.appendChild(row);
      return { row: row, nums: nums };
    });
    this.listenToColumn(column, which);
    return rows;
  };

  function rowIndex(event) {
    var row = event.target.closest && event.target.closest('.rgv-tok');
    return row ? parseInt(row.getAttribute('data-i'), 10) : null;
  }

  // Hover shows one token's lines; a click (or a tap) pins it and goes into the link.
  proto.listenToColumn = function (column, which) {
    var self = this;
    column.addEventListener('mouseover', function (event) {
      var i = rowIndex(event);
      if (i === null || (self.hover && self.hover.side === which && self.hover.i === i)) return;
      self.hover = { side: which, i: i };
      self.drawStage();
    });
    column.addEventListener('mouseleave', function () {
      self.hover = null;
      self.drawStage();
    });
    column.addEventListener('click', function (event) {
      var i = rowIndex(event);
      if (i === null) return;
      var field = which === 'q' ? 'token' : 'key';
      self.state[field] = self.state[field] === i ? null : i;
      self.state[which === 'q' ? 'key' : 'token'] = null;
      self.hover = null;
      self.render(true);
    });
  };

  // allow(q, k): whether the pair filter keeps the line from query q to key k.
  proto.allowFn = function () {
    var filter = this.state.filter;
    var groups = this.groups;
    if (filter === 'all' || !this.isPair) return function () { return true; };
    return function (q, k) { return groups[q] === filter[0] && groups[k] === filter[1]; };
  };

  proto.activeToken = function () {
    if (this.hover) return this.hover;
    if (this.state.token !== null) return { side: 'q', i: this.state.token };
    if (this.state.key !== null) return { side: 'k', i: this.state.key };
    return null;
  };

  proto.clearNumbers = function () {
    (this.touchedNums || []).forEach(function (nums) { nums.textContent = ''; });
    this.touchedNums = [];
    (this.activeRows || []).forEach(function (row) { row.classList.remove('rgv-active'); });
    this.activeRows = [];
  };

  proto.showNumber = function (nums, h, q, k, weight) {
    var span = el('span', 'rgv-num', weight.toFixed(4));
    span.setAttribute('data-head', String(h));
    span.setAttribute('data-q', String(q));
    span.setAttribute('data-k', String(k));
    span.setAttribute('data-w', String(weight));
    span.style.color = views.headColour(h, this.att.heads);
    span.title = 'head ' + h + ': ' + weight.toFixed(6);
    if (!nums.firstChild) this.touchedNums.push(nums);
    nums.appendChild(span);
  };

  // Draws the lines of the selected heads; with an active token only its lines, plus their weights as numbers.
  proto.drawStage = function () {
    var st = this.state;
    var active = this.activeToken();
    var frag = document.createDocumentFragment();
    var count = 0;
    this.clearNumbers();
    if (active) {
      var rows = active.side === 'q' ? this.leftRows : this.rightRows;
      rows[active.i].row.classList.add('rgv-active');
      this.activeRows.push(rows[active.i].row);
    }
    for (var i = 0; i < st.heads.length; i++) count += this.drawHead(st.heads[i], active, frag);
    while (this.svg.firstChild) this.svg.removeChild(this.svg.firstChild);
    this.svg.appendChild(frag);
    this.svg.setAttribute('data-lines', String(count));
    this.status.textContent = this.describe(active, count);
  };

  // A function that adds head h's line from query q to key k with weight w to `frag`.
  function lineDrawer(frag, h, colour) {
    return function (q, k, weight) {
      frag.appendChild(views.svgEl('line', {
        class: 'rgv-line',
        x1: 0,
        y1: q * ROW_H + ROW_H / 2,
        x2: LINES_W,
        y2: k * ROW_H + ROW_H / 2,
        stroke: colour,
        'stroke-opacity': weight.toFixed(4),
        'data-head': h,
        'data-q': q,
        'data-k': k,
        'data-w': weight,
      }));
    };
  }

  // Head h's lines into `frag`: those of the active token (with their weights as numbers),
  // or else the top-k of every query token. Returns how many.
  proto.drawHead = function (h, active, frag) {
    var matrix = this.att.matrix(this.state.layer, h);
    var line = lineDrawer(frag, h, views.headColour(h, this.att.heads));
    if (!active) return this.drawTopLines(matrix, line);
    var n = this.n;
    var allow = this.allowFn();
    var count = 0;
    for (var other = 0; other < n; other++) {
      var q = active.side === 'q' ? active.i : other;
      var k = active.side === 'q' ? other : active.i;
      if (!allow(q, k)) continue;
      line(q, k, matrix[q * n + k]);
      this.showNumber((active.side === 'q' ? this.rightRows[k] : this.leftRows[q]).nums, h, q, k, matrix[q * n + k]);
      count++;
    }
    return count;
  };

  // Every query's lines, limited to its top-k keys of at least the minimum weight where those are set.
  proto.drawTopLines = function (matrix, line) {
    var st = this.state;
    var n = this.n;
    var allow = this.allowFn();
    var everything = st.topk >= n && st.min <= 0;
    var count = 0;
    for (var q = 0; q < n; q++) {
      var keys = everything ? null : views.pickKeys(matrix, n, q, st.topk, st.min, allow);
      if (keys === null) {
        for (var k = 0; k < n; k++) {
          if (!allow(q, k)) continue;
          line(q, k, matrix[q * n + k]);
          count++;
        }
      } else {
        for (var j = 0; j < keys.length; j++) line(q, keys[j], matrix[q * n + keys[j]]);
        count += keys.length;
      }
    }
    return count;
  };

  proto.describe = function (active, count) {
    var st = this.state;
    var parts = ['Layer ' + st.layer, st.heads.length + ' of ' + this.att.heads + ' heads', count + ' lines'];
    if (active) {
      var tok = this.data.tokens[active.i];
      parts.push((active.side === 'q' ? 'attention from ' : 'attention to ') + '#' + active.i + ' ' + tok);
    } else {
      var sparse = st.topk < this.n || st.min > 0;
      parts.push(sparse ? 'top ' + st.topk + ' per token, weight \u2265 ' + st.min : 'all weights');
      parts.push('hover or tap a token for its weights');
    }
    return parts.join(' \u00b7 ');
  };
})(window.reportgenViews);
