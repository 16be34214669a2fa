/*
 * reportgen attention views: the head view, as in bertviz (Vig 2019, "A Multiscale
 * Visualization of Attention in the Transformer Model"): the tokens twice, attending on the
 * left and attended on the right, joined by one line per weight in the head's colour.
 * Adds the stage methods to ViewsWidget.prototype (views-widget.js, loaded first).
 *
 * With a token hovered, focused or pinned, each token on the other side shows one number (the
 * first selected head's weight, beside its colour chip) and one small bar per selected head;
 * the exact weights of every selected head stand in a table beside or under the lines (rows:
 * tokens, columns: heads), so twelve heads need about 600 px instead of a 1,000 px row of numbers.
 * The table's cells are the <span class="rgv-num"> test hooks. With contributions shown (the
 * widget's source()), every number is a share of what the head passes on to the attending token,
 * and its tooltip adds the size ||A f|| (data-m on the test hooks).
 *
 * Keyboard: each token column is one Tab stop (roving tabindex); arrows, Home and End move
 * within it, focusing a token previews its lines, Enter or Space pins it, Escape clears the pin.
 */
(function (views) {
  'use strict';

  var el = views.el;
  var ROW_H = 20; // px per token row; lines start and end at row centres
  var LINES_W = 220; // px between the two token columns (the SVG's own coordinates; CSS may narrow it)
  var BAR_W = 4; // px per head in a token's bar strip
  var proto = views.ViewsWidget.prototype;
  var SIDES = { q: 'attending', k: 'attended' };

  // The head view: token columns (HTML, so text stays text) around an SVG of lines, and the weights table.
  proto.buildStage = function () {
    var stage = el('div', 'rgv-stage');
    stage.style.setProperty('--rgv-row', ROW_H + 'px');
    if (views.isLong(this.n, this.m)) stage.appendChild(this.buildHeat()); // views-heatmap.js
    var pair = el('div', 'rgv-pair');
    this.left = el('div', 'rgv-col rgv-left');
    this.right = el('div', 'rgv-col rgv-right');
    this.leftRows = this.fillColumn(this.left, 'q');
    this.rightRows = this.fillColumn(this.right, 'k');
    var rows = Math.max(this.n, this.m); // an encoder-decoder's cross-attention: n decoder tokens, m source tokens
    this.svg = views.svgEl('svg', {
      class: 'rgv-lines',
      width: LINES_W,
      height: rows * ROW_H,
      viewBox: '0 0 ' + LINES_W + ' ' + rows * ROW_H,
      preserveAspectRatio: 'none', // narrowed on small screens: lines stretch, rows stay put
      'aria-hidden': 'true',
    });
    // Its height in CSS too: an SVG that flex narrows keeps its aspect ratio otherwise, and at 390 px its lines
    // covered the top 44% of the token rows (issue 47).
    this.svg.style.height = rows * ROW_H + 'px';
    pair.appendChild(this.left);
    pair.appendChild(this.svg);
    pair.appendChild(this.right);
    stage.appendChild(pair);
    this.weights = el('div', 'rgv-weights');
    this.weights.setAttribute('aria-label', 'weights of every selected head');
    this.weights.tabIndex = -1; // a Tab stop only while it holds a pinned token's table that scrolls (listWeights)
    stage.appendChild(this.weights);
    this.stageRoot = stage;
    return stage;
  };

  // The tokens of side `which`: 'q' the query tokens (left column), 'k' the key tokens (right column).
  proto.tokensOf = function (which) {
    return which === 'q' ? this.queryTokens : this.keyTokens;
  };

  // One row per token in `column`, numbers on its outer side; `which` is 'q' (left) or 'k' (right).
  proto.fillColumn = function (column, which) {
    var self = this;
    var special = which === 'q' ? this.querySpecial : this.keySpecial;
    column.setAttribute('role', 'group');
    column.setAttribute('aria-label', SIDES[which] + ' tokens: arrows move, Enter pins, Escape clears');
    var rows = this.tokensOf(which).map(function (tok, i) {
      var row = el('div', 'rgv-tok');
      row.setAttribute('data-i', String(i));
      row.setAttribute('data-group', self.groups[i]);
      row.setAttribute('role', 'button');
      row.setAttribute('aria-pressed', 'false');
      row.setAttribute('aria-label', SIDES[which] + ' token #' + i + ' ' + tok);
      row.tabIndex = i === 0 ? 0 : -1;
      if (special[i]) row.classList.add('rgv-special');
      var text = el('span', 'rgv-tok-text', tok);
      text.title = '#' + i + ' ' + tok;
      var nums = el('span', 'rgv-nums');
      row.appendChild(which === 'q' ? nums : text);
      row.appendChild(which === 'q' ? text : nums);
      column.appendChild(row);
      return { row: row, nums: nums };
    });
    this.listenToColumn(column, which);
    this.listenToKeys(column, which, rows);
    return rows;
  };

  function rowIndex(event) {
    var row = event.target.closest && event.target.closest('.rgv-tok');
    return row ? parseInt(row.getAttribute('data-i'), 10) : null;
  }

  // Shows token i of side `which` as if hovered (mouse or keyboard focus), drawing only on a change.
  proto.preview = function (which, i) {
    if (this.isLoading()) return; // the heads to draw are not in yet: render() draws them when they are
    if (i === null && this.hover === null) return;
    if (i !== null && this.hover && this.hover.side === which && this.hover.i === i) return;
    this.hover = i === null ? null : { side: which, i: i };
    this.drawStage();
  };

  // Pins token i of side `which` (again: unpins it) and puts it in the link.
  proto.pin = function (which, i) {
    var field = which === 'q' ? 'token' : 'key';
    this.state[field] = this.state[field] === i ? null : i;
    this.state[which === 'q' ? 'key' : 'token'] = null;
    this.hover = null;
    this.render(true);
  };

  // Clears the pinned token, if any; returns whether there was one.
  proto.unpin = function () {
    if (this.state.token === null && this.state.key === null && this.hover === null) return false;
    this.state.token = null;
    this.state.key = null;
    this.hover = null;
    this.render(true);
    return true;
  };

  // Hover shows one token's lines; a click (or a tap) pins it and goes into the link.
  proto.listenToColumn = function (column, which) {
    var self = this;
    column.addEventListener('mouseover', function (event) {
      var i = rowIndex(event);
      if (i !== null) self.preview(which, i);
    });
    column.addEventListener('mouseleave', function () { self.preview(which, null); });
    column.addEventListener('click', function (event) {
      var i = rowIndex(event);
      if (i !== null) self.pin(which, i);
    });
  };

  // Roving tabindex: the column is one Tab stop; focus previews, Enter/Space pins.
  proto.listenToKeys = function (column, which, rows) {
    var self = this;
    var n = rows.length;
    column.addEventListener('focusin', function (event) {
      var i = rowIndex(event);
      if (i === null) return;
      rows.forEach(function (entry, j) { entry.row.tabIndex = j === i ? 0 : -1; });
      self.preview(which, i);
    });
    column.addEventListener('focusout', function (event) {
      if (!column.contains(event.relatedTarget)) self.preview(which, null);
    });
    column.addEventListener('keydown', function (event) {
      var i = rowIndex(event);
      if (i === null) return;
      var moves = { ArrowDown: i + 1, ArrowUp: i - 1, Home: 0, End: n - 1, PageDown: i + 10, PageUp: i - 10 };
      if (event.key === 'Enter' || event.key === ' ') {
        self.pin(which, i);
      } else if (event.key in moves) {
        rows[Math.max(0, Math.min(n - 1, moves[event.key]))].row.focus();
      } else {
        return;
      }
      event.preventDefault(); // no page scroll on Space and the arrows
    });
  };

  // allow(q, k): whether the pair filter keeps the line from query q to key k. A causal group (an encoder-decoder's
  // decoder) draws nothing above the diagonal, where its weights are 0 (and decode to at most 0.5/255).
  proto.allowFn = function () {
    var filter = this.state.filter;
    var groups = this.groups;
    if (this.causal) return function (q, k) { return k <= q; };
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

  // Marks the active token's row, and the pinned one (aria-pressed) in both columns.
  proto.markRows = function (active) {
    var st = this.state;
    if (active) {
      var rows = active.side === 'q' ? this.leftRows : this.rightRows;
      rows[active.i].row.classList.add('rgv-active');
      this.activeRows.push(rows[active.i].row);
    }
    this.leftRows.forEach(function (entry, i) { entry.row.setAttribute('aria-pressed', String(st.token === i)); });
    this.rightRows.forEach(function (entry, i) { entry.row.setAttribute('aria-pressed', String(st.key === i)); });
  };

  // Draws the lines of the selected heads; with an active token only its lines, plus their weights.
  proto.drawStage = function () {
    var st = this.state;
    var active = this.activeToken();
    var frag = document.createDocumentFragment();
    var count = 0;
    this.clearNumbers();
    this.markRows(active);
    this.stageRoot.style.setProperty('--rgv-bars', (st.heads.length > 1 ? st.heads.length * BAR_W : 0) + 'px');
    var weights = active ? [] : null;
    for (var i = 0; i < st.heads.length; i++) count += this.drawHead(st.heads[i], active, frag, weights);
    while (this.svg.firstChild) this.svg.removeChild(this.svg.firstChild);
    this.svg.appendChild(frag);
    this.svg.setAttribute('data-lines', String(count));
    if (active) this.showInline(active, weights);
    this.drawWeights(active, weights);
    if (this.heat) this.drawHeat();
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

  // Head h's lines into `frag`: those of the active token (their weights pushed to `weights` as
  // {h, q, k, w, m}, in token order; m: ||A f|| with contributions, else null), or else the top-k
  // of every query token. Returns how many.
  proto.drawHead = function (h, active, frag, weights) {
    var source = this.source();
    var matrix = source.matrix(this.state.layer, h);
    var totals = source.rowTotals(this.state.layer, h);
    var line = lineDrawer(frag, h, views.headColour(h, this.att.heads));
    if (!active) return this.drawTopLines(matrix, line);
    var m = this.m;
    var allow = this.allowFn();
    var count = 0;
    var others = active.side === 'q' ? m : this.n;
    for (var other = 0; other < others; other++) {
      var q = active.side === 'q' ? active.i : other;
      var k = active.side === 'q' ? other : active.i;
      if (!allow(q, k)) continue;
      line(q, k, matrix[q * m + k]);
      weights.push({ h: h, q: q, k: k, w: matrix[q * m + k], m: totals ? matrix[q * m + k] * totals[q] : null });
      count++;
    }
    return count;
  };

  // Every query's lines, limited to its top-k keys of at least the minimum weight where those are set.
  proto.drawTopLines = function (matrix, line) {
    var st = this.state;
    var n = this.n;
    var m = this.m; // keys per row: n, except in cross-attention
    var allow = this.allowFn();
    var everything = st.topk >= m && st.min <= 0;
    var count = 0;
    for (var q = 0; q < n; q++) {
      var keys = everything ? null : views.pickKeys(matrix, m, q, st.topk, st.min, allow);
      if (keys === null) {
        for (var k = 0; k < m; k++) {
          if (!allow(q, k)) continue;
          line(q, k, matrix[q * m + k]);
          count++;
        }
      } else {
        for (var j = 0; j < keys.length; j++) line(q, keys[j], matrix[q * m + keys[j]]);
        count += keys.length;
      }
    }
    return count;
  };

  // Beside each token on the other side: the first selected head's weight, and a bar per selected head.
  proto.showInline = function (active, weights) {
    var rows = active.side === 'q' ? this.rightRows : this.leftRows;
    var first = this.state.heads[0];
    var many = this.state.heads.length > 1;
    var strips = {};
    for (var j = 0; j < weights.length; j++) {
      var entry = weights[j];
      var other = active.side === 'q' ? entry.k : entry.q;
      var nums = rows[other].nums;
      if (entry.h === first) {
        nums.appendChild(this.inlineNumber(entry));
        this.touchedNums.push(nums);
        if (many) strips[other] = nums.appendChild(el('span', 'rgv-bars'));
      }
      if (many) strips[other].appendChild(this.weightBar(entry));
    }
  };

  proto.inlineNumber = function (entry) {
    var span = el('span', 'rgv-inline-num', views.weightText(entry.w));
    setWeightData(span, entry);
    span.style.setProperty('--rgv-head', views.headColour(entry.h, this.att.heads));
    span.title = this.valueTitle(entry, 6);
    return span;
  };

  // A number's tooltip: the head and its weight, or its share and the size of what it passes on.
  proto.valueTitle = function (entry, digits) {
    if (entry.m === null || entry.m === undefined) return 'head ' + entry.h + ': ' + entry.w.toFixed(digits);
    return 'head ' + entry.h + ': ' + entry.w.toFixed(4) + ' of what it passes on to #' + entry.q + ' ' +
      this.queryTokens[entry.q] + '; ||A f|| = ' + views.sizeOf(entry.m);
  };

  proto.weightBar = function (entry) {
    var bar = el('span', 'rgv-bar-h');
    bar.style.setProperty('--rgv-head', views.headColour(entry.h, this.att.heads));
    bar.style.height = Math.round(entry.w * 100) + '%';
    bar.title = this.valueTitle(entry, 4);
    return bar;
  };

  function setWeightData(node, entry) {
    node.setAttribute('data-head', String(entry.h));
    node.setAttribute('data-q', String(entry.q));
    node.setAttribute('data-k', String(entry.k));
    node.setAttribute('data-w', String(entry.w));
    if (entry.m !== null && entry.m !== undefined) node.setAttribute('data-m', String(entry.m));
  }

  // Four decimals without the leading zero (".0431"; "1.000" for 1): exact enough, and 12 columns fit.
  views.weightText = function (weight) {
    return weight >= 0.99995 ? '1.000' : weight.toFixed(4).replace(/^0/, '');
  };

  // A contribution's size ||A f|| with three significant digits ("1.27", "0.0431", "12.3").
  views.sizeOf = function (size) {
    return size >= 100 ? size.toFixed(0) : size.toPrecision(3);
  };

  // The table of every selected head's weights for the active token (or a hint when there is none).
  proto.drawWeights = function (active, weights) {
    var box = this.weights;
    box.textContent = '';
    box.tabIndex = -1;
    var contributions = this.state.mode === 'contributions';
    if (!active || !weights.length) {
      var hint = 'Hover, tap or Tab to a token to list every selected head\u2019s ' +
        (contributions ? 'contributions.' : 'weights.');
      if (!this.state.heads.length) hint = 'No head selected.';
      else if (active) hint = 'The pair filter keeps none of this token\u2019s lines.';
      box.appendChild(el('p', 'rgv-weights-hint', hint));
      return;
    }
    var tok = this.tokensOf(active.side)[active.i];
    var title = (contributions ? (active.side === 'q' ? 'Contributions to #' : 'Contributions of #')
      : (active.side === 'q' ? 'Attention from #' : 'Attention to #')) + active.i + ' ' + tok +
      ', layer ' + this.state.layer + (contributions ? ' (shares; hover for ||A f||)' : '');
    var heading = box.appendChild(el('p', 'rgv-weights-title', title));
    box.appendChild(this.weightsTable(active, weights));
    // On a phone the table scrolls inside its box: say so. Measured at the next frame, with the layout the
    // browser does anyway, rather than forcing one in the middle of a hover.
    var pinned = this.state.token !== null || this.state.key !== null;
    requestAnimationFrame(function () {
      var scrolls = heading.isConnected && box.scrollWidth > box.clientWidth + 1;
      box.classList.toggle('rgv-scrolls', scrolls);
      // Chromium makes a scrolling box a Tab stop by itself; a preview's box empties when focus leaves its token,
      // which dropped focus to the page (issue 47), so only a pinned table, which stays, takes the keyboard.
      box.tabIndex = scrolls && pinned ? 0 : -1;
      if (scrolls) heading.appendChild(el('span', 'rgv-table-hint', ' \u00b7 scroll sideways for every head \u2194'));
    });
  };

  proto.weightsTable = function (active, weights) {
    var heads = this.state.heads;
    var table = el('table', 'rgv-wtable');
    var headRow = el('tr');
    headRow.appendChild(el('th', 'rgv-wtable-corner', active.side === 'q' ? 'key' : 'query'));
    var colours = heads.map(function (h) { return views.headColour(h, this.att.heads); }, this);
    heads.forEach(function (h, col) {
      var cell = el('th', 'rgv-wtable-head', 'H' + h);
      cell.style.setProperty('--rgv-head', colours[col]);
      cell.title = 'head ' + h;
      headRow.appendChild(cell);
    });
    table.appendChild(el('thead')).appendChild(headRow);
    var body = el('tbody');
    var perHead = weights.length / heads.length; // the same tokens for every head (the filter does not depend on it)
    var best = strongest(weights, perHead);
    for (var r = 0; r < perHead; r++) body.appendChild(this.weightsRow(active, weights, r, perHead, colours, best));
    table.appendChild(body);
    if (weights[0].m !== null && active.side === 'q') table.appendChild(this.totalsRow(active, heads));
    return table;
  };

  // Contributions to one attending token: each head's total, sum_j ||A[i, j] f(x_j)|| (shares times it give ||A f||).
  proto.totalsRow = function (active, heads) {
    var source = this.source();
    var layer = this.state.layer;
    var row = el('tr', 'rgv-wtable-total');
    var name = el('th', 'rgv-wtable-tok', 'sum ||A f||');
    name.title = 'All that each head passes on to #' + active.i + ' ' + this.queryTokens[active.i] +
      ': the sum over keys of ||A f||; a share times it is that key\u2019s ||A f||';
    row.appendChild(name);
    heads.forEach(function (h) {
      var cell = el('td', 'rgv-wcell', views.sizeOf(source.rowTotals(layer, h)[active.i]));
      cell.title = 'head ' + h + ': sum of ||A f|| over the keys';
      row.appendChild(cell);
    });
    return el('tfoot').appendChild(row).parentNode;
  };

  // Index in `weights` of each head's largest weight, the ones the table sets in bold.
  function strongest(weights, perHead) {
    var best = {};
    for (var j = 0; j < weights.length; j++) {
      var col = Math.floor(j / perHead);
      if (!(col in best) || weights[j].w > weights[best[col]].w) best[col] = j;
    }
    return best;
  }

  proto.weightsRow = function (active, weights, r, perHead, colours, best) {
    var other = active.side === 'q' ? weights[r].k : weights[r].q;
    var tok = this.tokensOf(active.side === 'q' ? 'k' : 'q')[other];
    var tr = el('tr');
    var name = el('th', 'rgv-wtable-tok', '#' + other + ' ' + tok);
    name.title = '#' + other + ' ' + tok;
    tr.appendChild(name);
    for (var col = 0; col * perHead < weights.length; col++) {
      var entry = weights[col * perHead + r];
      var cell = el('td', best[col] === col * perHead + r ? 'rgv-wcell rgv-wbest' : 'rgv-wcell');
      cell.style.backgroundColor = tint(colours[col], entry.w);
      var span = el('span', 'rgv-num', views.weightText(entry.w));
      setWeightData(span, entry);
      span.title = this.valueTitle(entry, 6);
      tr.appendChild(cell).appendChild(span);
    }
    return tr;
  };

  // The head colour `hex` at an opacity growing with the weight, up to views.HEAD_TINT.
  function tint(hex, weight) {
    var channels = [1, 3, 5].map(function (at) { return parseInt(hex.slice(at, at + 2), 16); });
    var alpha = views.HEAD_TINT * Math.max(0, Math.min(1, weight));
    return 'rgba(' + channels.join(', ') + ', ' + alpha.toFixed(3) + ')';
  }

  proto.describe = function (active, count) {
    var st = this.state;
    var parts = ['Layer ' + st.layer, st.heads.length + ' of ' + this.att.heads + ' heads', count + ' lines'];
    var contributions = st.mode === 'contributions';
    if (active) {
      var tok = this.tokensOf(active.side)[active.i];
      var what = contributions ? (active.side === 'q' ? 'contributions to ' : 'contributions of ')
        : (active.side === 'q' ? 'attention from ' : 'attention to ');
      parts.push(what + '#' + active.i + ' ' + tok);
      if (st.heads.length) parts.push('numbers beside the tokens: head ' + st.heads[0]);
    } else {
      var sparse = st.topk < this.m || st.min > 0;
      var noun = contributions ? 'share' : 'weight';
      parts.push(sparse ? 'top ' + st.topk + ' per token, ' + noun + ' \u2265 ' + st.min
        : (contributions ? 'all contributions' : 'all weights'));
      parts.push('hover, tap or Tab to a token for its weights (Enter pins, Escape clears)');
    }
    return parts.join(' \u00b7 ');
  };
})(window.reportgenViews);
