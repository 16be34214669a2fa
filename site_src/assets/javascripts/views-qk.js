/*
 * reportgen attention views: the query/key view of an example's q/k page. For one query
 * token and one (layer, head) it shows, for every key, the softmax weight computed here from
 * the stored vectors next to the model's own weight, then q . k, the scaled score, the key
 * vector and its elementwise product with the query, so a reader can follow how attention is
 * computed. The data is one chunk per layer (reportgen/site/views.py qk_payload), inline or in data
 * files beside the page (views-core.js DataFiles). Needs views-core.js first.
 *
 * Models whose score is more than q . k x scale (the payload's `terms`: DeBERTa's c2p and p2c, He et
 * al. 2021; MPNet's relative position bias, Song et al. 2020) get one column per term and a "= score"
 * column after "x scale"; keys the model masks for the query (the payload's `visible`: ModernBERT's
 * sliding window) stay in the table, greyed, with "masked" as their score and softmax 0, and the note
 * says how many there are. Without either the table is what it always was.
 *
 * A long input (more than views.QK_PAGE tokens) lists a page of keys at a time and its query tokens a page at
 * a time: views-qk-long.js adds that to the widget (a single file of a short input leaves it out; without it a
 * table lists every key). Model weights held apart from the layers (`weights`: 'attention') are read a head at a
 * time: a long example's are its example page's own data files (reportgen/site/view_files.py example_pages).
 *
 * QKTable draws the table and fits it to its box; QKWidget holds the state, the controls,
 * the data and the deep link.
 */
(function (views) {
  'use strict';

  var el = views.el;
  // Keys (and query tokens) a long input's table (strip) shows at once (reportgen/site/views.py QK_PAGE).
  var QK_PAGE = views.QK_PAGE = 64;
  // [title, what it is]: the key and its weights first, so they stay in sight on a narrow screen.
  var COLUMNS = [
    ['key', 'the key token'],
    ['softmax', 'softmax of the scaled scores over the keys, computed here from the stored q and k'],
    ['model', 'the weight the model itself gave (stored at 8 bits)'],
    ['q\u00a0\u00b7\u00a0k', 'dot product of the query and this key'],
    ['\u00d7\u00a0scale', 'q \u00b7 k times the model\u2019s scaling: the score the softmax takes'],
    ['k (key vector)', 'the key vector, one cell per dimension'],
    ['q \u00d7 k (elementwise)', 'the products whose sum is q \u00b7 k, one cell per dimension'],
  ];
  // The score column's title (a payload with terms or a mask gets the column after them), and the "x scale"
  // column's title then.
  var SCORE_TITLE = 'the score the softmax takes: q \u00b7 k \u00d7 scale';
  var SCORE_MASKED = '; \u201cmasked\u201d where the model hides this key from the query (the softmax leaves it out)';
  var SCALED_TITLE = 'q \u00b7 k times the model\u2019s scaling';
  var MASKED_TITLE = 'the model masks this key for this query: it is left out of the softmax, and its weight is 0';

  // The table's columns: COLUMNS, and with score terms (payload `terms`) or masked keys one column per
  // term and the score column between "x scale" and the key vector.
  function tableColumns(terms, masks) {
    if (!terms.length && !masks) return COLUMNS;
    var scaled = [COLUMNS[4][0], SCALED_TITLE];
    var added = terms.map(function (term) { return ['+\u00a0' + term.label, term.title]; });
    var score = ['=\u00a0score',
      SCORE_TITLE + (terms.length ? ' plus the terms before it' : '') + (masks ? SCORE_MASKED : '')];
    return COLUMNS.slice(0, 4).concat([scaled], added, [score], COLUMNS.slice(5));
  }

  var LEGEND = 'Cells: red positive, blue negative; the stronger the colour, the larger the magnitude ' +
    '(q and k against the largest |value| of this head, q \u00d7 k against the largest |product| for this query).';
  var HINT = 'The table scrolls sideways: the score, the vectors and their products are to the right \u2192';

  // Red for positive, blue for negative, more opaque the larger |v| is against maxAbs.
  function vectorColour(value, maxAbs) {
    var t = maxAbs > 0 ? Math.min(1, Math.abs(value) / maxAbs) : 0;
    return value >= 0 ? 'rgba(214, 39, 40, ' + t.toFixed(3) + ')' : 'rgba(31, 119, 180, ' + t.toFixed(3) + ')';
  }

  function numberCell(text, className) {
    return el('td', 'rgv-number' + (className ? ' ' + className : ''), text);
  }

  // ------------------------------------------------------------------ table

  // The table of one query's keys inside its scroll box; `sizer` carries --rgv-cell for every strip.
  // `terms`: the payload's score terms ([] for none); `masks`: whether the model masks keys anywhere.
  function QKTable(tokens, dim, scaling, sizer, terms, masks) {
    this.tokens = tokens;
    this.dim = dim;
    this.scaling = scaling;
    this.sizer = sizer;
    this.terms = terms || [];
    this.scored = this.terms.length > 0 || Boolean(masks); // the table has the "= score" column
    this.table = el('table', 'rgv-qk-table');
    var head = el('tr');
    tableColumns(this.terms, masks).forEach(function (column) {
      var cell = el('th', null, column[0]);
      cell.title = column[1];
      cell.scope = 'col';
      head.appendChild(cell);
    });
    this.table.appendChild(el('thead')).appendChild(head);
    this.tbody = this.table.appendChild(el('tbody'));
    this.wrap = el('div', 'rgv-qk-wrap');
    this.wrap.tabIndex = 0; // a scroll box is reachable by keyboard
    this.wrap.setAttribute('role', 'region');
    this.wrap.setAttribute('aria-label', 'query/key table');
    this.wrap.appendChild(this.table);
    this.hint = el('p', 'rgv-qk-hint', HINT);
    this.hint.hidden = true;
  }

  // A vector as a strip of coloured cells, values[offset .. offset + dim).
  QKTable.prototype.strip = function (values, offset, maxAbs) {
    var strip = el('span', 'rgv-vec');
    for (var d = 0; d < this.dim; d++) {
      var value = values[offset + d];
      var cell = el('span', 'rgv-cell');
      cell.style.backgroundColor = vectorColour(value, maxAbs);
      cell.title = 'dim ' + d + ': ' + value.toFixed(4);
      strip.appendChild(cell);
    }
    return strip;
  };

  // The rows of query `token` (rows: views.queryKeyRows) against the model's weights, for the keys `shown` (in that
  // order); returns the largest difference between the two weight columns over every key.
  QKTable.prototype.fill = function (keys, rows, token, model, shown) {
    var n = this.tokens.length;
    var frag = document.createDocumentFragment();
    var worst = 0;
    for (var k = 0; k < n; k++) worst = Math.max(worst, Math.abs(rows.softmax[k] - model[token * n + k]));
    for (var i = 0; i < shown.length; i++) {
      frag.appendChild(this.row(shown[i], keys, rows, model[token * n + shown[i]]));
    }
    this.tbody.textContent = '';
    this.tbody.appendChild(frag);
    this.fit();
    return worst;
  };

  // Key k's row: its weights (softmax here, the model's), dot product, score (and its terms), vector and
  // products; a key the model masks for this query is greyed, and its score reads "masked".
  QKTable.prototype.row = function (k, keys, rows, weight) {
    var dot = rows.dots[k];
    var soft = rows.softmax[k];
    var masked = Boolean(rows.seen) && !rows.seen[k];
    var tr = el('tr', 'rgv-qk-row' + (masked ? ' rgv-qk-masked' : ''));
    tr.setAttribute('data-k', String(k));
    tr.setAttribute('data-dot', String(dot));
    tr.setAttribute('data-score', String(rows.scores[k]));
    tr.setAttribute('data-softmax', String(soft));
    tr.setAttribute('data-model', String(weight));
    if (masked) {
      tr.setAttribute('data-masked', 'true');
      tr.title = MASKED_TITLE;
    }
    var tokCell = el('th', 'rgv-tok-text rgv-qk-key', this.tokens[k]);
    if (this.tokens.length > QK_PAGE) tokCell.insertBefore(el('span', 'rgv-qk-index', '#' + k + ' '), tokCell.firstChild);
    tokCell.scope = 'row';
    tokCell.title = '#' + k + (masked ? ', masked for this query' : '');
    tr.appendChild(tokCell);
    var softCell = numberCell(null, 'rgv-soft');
    softCell.appendChild(el('span', 'rgv-bar')).style.width = (soft * 100).toFixed(1) + '%';
    softCell.appendChild(el('span', 'rgv-soft-value', soft.toFixed(4)));
    tr.appendChild(softCell);
    tr.appendChild(numberCell(weight.toFixed(4)));
    tr.appendChild(numberCell(dot.toFixed(3)));
    tr.appendChild(numberCell((dot * this.scaling).toFixed(3)));
    if (this.scored) this.scoreCells(tr, k, rows, masked);
    tr.appendChild(el('td', 'rgv-qk-vec')).appendChild(this.strip(keys, k * this.dim, rows.maxAbs));
    tr.appendChild(el('td', 'rgv-qk-vec')).appendChild(this.strip(rows.products, k * this.dim, rows.maxProduct));
    return tr;
  };

  // The term cells and the score cell of key k's row (a table with the "= score" column). A masked key's
  // terms are not part of any score (the payload stores them as 0), so they read as a dash.
  QKTable.prototype.scoreCells = function (tr, k, rows, masked) {
    this.terms.forEach(function (term, t) {
      var cell = numberCell(masked ? '\u2013' : rows.termValues[t][k].toFixed(3), 'rgv-qk-term');
      cell.title = term.label + (masked ? ': not used, the key is masked' : ': ' + rows.termValues[t][k].toFixed(4));
      tr.appendChild(cell);
    });
    tr.appendChild(numberCell(masked ? 'masked' : rows.scores[k].toFixed(3), 'rgv-qk-score'));
  };

  /*
   * The vector strips' cell width (--rgv-cell, 2 to 10 px): as wide as lets the table fit its box,
   * from a measurement of the table at the present width, since the other columns' widths depend
   * on the fonts. Where even 2 px do not fit (phones), the box scrolls and the hint shows.
   */
  QKTable.prototype.fit = function () {
    var strips = 2 * this.dim;
    // A header wider than its strip hides part of the strips' width: a second look settles it.
    for (var look = 0; look < 2; look++) {
      var current = parseFloat(this.sizer.style.getPropertyValue('--rgv-cell')) || 6;
      var others = this.table.offsetWidth - strips * current;
      var cell = Math.max(2, Math.min(10, Math.floor((this.wrap.clientWidth - others) / strips)));
      if (cell === current) break;
      this.sizer.style.setProperty('--rgv-cell', cell + 'px');
    }
    var scrolls = this.wrap.scrollWidth > this.wrap.clientWidth + 1;
    this.hint.hidden = !scrolls;
    this.wrap.classList.toggle('rgv-scrolls', scrolls);
  };

  // ----------------------------------------------------------------- widget

  function QKWidget(root, data, ownsHash) {
    this.started = performance.now();
    this.root = root;
    this.data = data;
    this.ownsHash = ownsHash;
    this.layers = data.shape[0];
    this.heads = data.shape[1];
    this.n = data.shape[2];
    this.dim = data.head_dim;
    this.files = data.files ? new views.DataFiles(data.files) : null;
    // The model's weights in the views' encoding when the payload carries them once (a single-file view).
    this.weights = data.weights === 'attention' ? new views.Attention(data.attention) : null;
    this.decoded = new Map(); // layer -> per head {q, k, model (null where `weights` holds it), terms}
    this.long = this.n > QK_PAGE && Boolean(this.buildKeyChoice); // views-qk-long.js adds the long input's parts
    this.keyChoice = 'top'; // a long input's table: 'top' or a page of keys (views-qk-long.js qkShownKeys)
    this.stripPage = 0; // a long input's page of query tokens in the strip
    this.terms = data.terms || []; // score terms beyond q . k (DeBERTa, MPNet), [] for BERT
    this.visibility = new Map(); // layer -> which keys each query sees (views-core.js decodeVisible), null: all
    var firstWord = data.special.indexOf(0);
    this.state = { layer: 0, head: 0, token: firstWord >= 0 ? firstWord : 0 };
    this.build();
    if (ownsHash) this.applyHash(false);
    this.render(false);
  }

  // The decoded heads of one layer, or null while its data file is loading (render runs again when it is in).
  QKWidget.prototype.layerData = function (layer, fromUser) {
    var self = this;
    if (this.decoded.has(layer)) return this.decoded.get(layer);
    var text = this.files ? this.files.text('qk-l' + layer) : this.data.layers[layer];
    if (text !== null) {
      // Weights held apart (`weights`) are read per head when drawn (modelWeights): a long input's are in files.
      this.decoded.set(layer, views.decodeQKLayer(text, this.heads, this.n, this.dim,
        this.weights && function () { return null; }, this.terms.length));
      return this.decoded.get(layer);
    }
    this.root.setAttribute('data-rgv-loading', String(layer));
    this.note.textContent = 'Loading layer ' + layer + ' (' + views.sizeText(this.files.bytes) + ')\u2026';
    this.files.request(['qk-l' + layer], function (error) {
      self.root.removeAttribute('data-rgv-loading');
      if (error) self.note.textContent = error.message;
      else self.render(fromUser);
    });
    return null;
  };

  // The model's weights of (layer, head), Float32Array [n * n]: the layer's own, or those of `weights` once loaded
  // (null meanwhile: render runs again when they are in).
  QKWidget.prototype.modelWeights = function (layer, head, vec, fromUser) {
    var self = this;
    if (!this.weights) return vec.model;
    var note = this.weights.ensure([[layer, head]], function (error) {
      self.root.removeAttribute('data-rgv-loading');
      if (error) self.note.textContent = error.message;
      else self.render(fromUser);
    });
    if (!note) return this.weights.matrix(layer, head);
    this.root.setAttribute('data-rgv-loading', layer + '-' + head);
    this.note.textContent = note;
    return null;
  };

  // Which keys each query of `layer` sees (Uint8Array [n * n]), or null where it sees every key; layers with the
  // same mask (a decoder's 'causal') share one.
  QKWidget.prototype.visibleIn = function (layer) {
    if (!this.data.visible) return null;
    var text = this.data.visible[layer];
    if (!this.visibility.has(text)) this.visibility.set(text, views.decodeVisible(text, this.n));
    return this.visibility.get(text);
  };

  QKWidget.prototype.build = function () {
    var self = this;
    this.root.classList.add('rgv-ready', 'rgv-qk');
    this.root.appendChild(this.buildToolbar());
    this.hashNote = this.root.appendChild(el('p', 'rgv-hash-note'));
    this.hashNote.setAttribute('role', 'status');
    this.hashNote.hidden = true;
    this.root.appendChild(this.buildTokenStrip());
    this.queryLine = this.root.appendChild(el('div', 'rgv-qk-query'));
    this.root.appendChild(el('p', 'rgv-qk-legend', LEGEND));
    this.table = new QKTable(this.data.tokens, this.dim, this.data.scaling, this.root, this.terms,
      Boolean(this.data.visible));
    this.root.appendChild(this.table.hint);
    this.root.appendChild(this.table.wrap);
    this.note = this.root.appendChild(el('p', 'rgv-status'));
    this.note.setAttribute('aria-live', 'polite');
    window.addEventListener('resize', function () { self.table.fit(); });
  };

  QKWidget.prototype.buildToolbar = function () {
    var self = this;
    var bar = el('div', 'rgv-toolbar');
    this.layerSelect = views.stateSelect(this, 'layer', 'rgv-layer', this.layers, 'Layer');
    this.headSelect = views.stateSelect(this, 'head', 'rgv-head', this.heads, 'Head');
    bar.appendChild(views.labelled('Layer', this.layerSelect));
    bar.appendChild(views.labelled('Head', this.headSelect));
    if (this.long) bar.appendChild(views.labelled('Keys', this.buildKeyChoice()));
    bar.appendChild(views.copyControl(function () { return self.hashText(); }));
    return bar;
  };

  // The query token buttons: all of them, or a long input's page of them after its pager (views-qk-long.js).
  QKWidget.prototype.buildTokenStrip = function () {
    var box = el('div', 'rgv-qk-strip');
    if (this.long) box.appendChild(this.buildPager());
    this.strip = box.appendChild(views.group('rgv-qk-tokens', 'query token'));
    this.showStrip(0);
    return box;
  };

  // Fills the strip with the query tokens of `page` (all of them for a short input).
  QKWidget.prototype.showStrip = function (page) {
    var shown = this.long ? this.stripRange(page) : [0, this.n];
    this.strip.textContent = '';
    this.tokenButtons = [];
    for (var i = shown[0]; i < shown[1]; i++) {
      var node = views.button('rgv-qk-token', this.data.tokens[i], 'query token #' + i);
      node.setAttribute('data-i', String(i));
      node.setAttribute('aria-pressed', String(i === this.state.token));
      node.addEventListener('click', this.choose.bind(this, i));
      this.strip.appendChild(node);
      this.tokenButtons.push(node);
    }
  };

  QKWidget.prototype.choose = function (token) {
    this.state.token = token;
    this.render(true);
  };

  QKWidget.prototype.render = function (fromUser) {
    var st = this.state;
    this.layerSelect.value = String(st.layer);
    this.headSelect.value = String(st.head);
    if (this.long) this.followQuery();
    this.tokenButtons.forEach(function (node) {
      node.setAttribute('aria-pressed', String(node.getAttribute('data-i') === String(st.token)));
    });
    if (fromUser && this.ownsHash) views.writeHash(this.hashText());
    views.announceRender(this.root); // an open copy-link box takes the new address
    var layer = this.layerData(st.layer, fromUser);
    if (!layer) return;
    var vec = layer[st.head];
    var model = this.modelWeights(st.layer, st.head, vec, fromUser);
    if (!model) return;
    var rows = views.queryKeyRows(vec.q, vec.k, st.token, this.dim, this.data.scaling, vec.terms,
      this.visibleIn(st.layer));
    this.queryLine.textContent = '';
    this.queryLine.appendChild(el('span', 'rgv-qk-label', 'q of #' + st.token + ' '));
    this.queryLine.appendChild(el('span', 'rgv-tok-text', this.data.tokens[st.token]));
    this.queryLine.appendChild(this.table.strip(vec.q, st.token * this.dim, rows.maxAbs));
    var shown = this.long ? views.qkShownKeys(rows.softmax, this.n, this.keyChoice, QK_PAGE) : views.range(this.n);
    this.note.textContent = this.noteText(this.table.fill(vec.k, rows, st.token, model, shown), rows.masked) +
      (this.long ? this.shownText(shown) : '');
    this.root.setAttribute('data-rgv-state', this.hashText());
    if (!this.root.hasAttribute('data-first-render-ms')) views.markFirstRender(this.root, this.started);
  };

  // The status line: what the table computes (views-core.js qkSoftmaxText: the terms, and the keys the model
  // masks for this query) and how far it is from the model's stored weights.
  QKWidget.prototype.noteText = function (worst, masked) {
    var st = this.state;
    var check = this.data.check;
    var labels = this.terms.map(function (term) { return term.label; });
    var text = 'Layer ' + st.layer + ', head ' + st.head + ', query #' + st.token + ': ' +
      views.qkSoftmaxText(this.data.scaling, labels, this.n, masked) +
      '; on this row it differs from the model\u2019s weights by at most ' + worst.toFixed(4);
    if (worst <= check.rounding) return text + ', within the ' + check.rounding.toFixed(4) + ' that rounding allows.';
    return text + ', more than rounding allows (' + check.rounding.toFixed(4) + '): ' + (labels.length
      ? 'the model\u2019s score has more to it than the terms shown here.'
      : 'this model adds terms beyond q \u00b7 k, e.g. relative positions.');
  };

  QKWidget.prototype.hashText = function () {
    return views.formatHash({ view: 'qk', layer: this.state.layer, head: this.state.head, token: this.state.token });
  };

  // Restores the state a link describes; values out of range keep the current ones, with a note saying so.
  QKWidget.prototype.applyHash = function (rerender) {
    var limits = { layers: this.layers, heads: this.heads, tokens: this.n };
    var link = views.readHash(limits);
    if (!link) return;
    if (link.layer !== null) this.state.layer = link.layer;
    if (link.head !== null) this.state.head = link.head;
    if (link.token !== null) this.state.token = link.token;
    this.showHashNote(link, limits);
    if (rerender) this.render(false);
  };

  // What a link asked for that this page cannot show (views-core.js hashNote), and what it shows instead.
  QKWidget.prototype.showHashNote = function (link, limits) {
    var problems = (link.problems || []).filter(function (problem) {
      return problem.field === 'layer' || problem.field === 'head';
    });
    if (link.view !== null && link.view !== 'qk') problems.unshift({ field: 'view', given: link.view.slice(0, 24) });
    var note = views.hashNote ? views.hashNote(problems, limits,
      { view: 'query/key view', layer: this.state.layer, heads: [this.state.head] }) : '';
    var token = (link.problems || []).filter(function (problem) { return problem.field === 'token'; })[0];
    if (token) {
      note += (note ? ' ' : '') + 'The link asked for query token ' + token.given + '; this example has tokens 0\u2013' +
        (this.n - 1) + '. Showing query #' + this.state.token + '.';
    }
    this.hashNote.textContent = note;
    this.hashNote.hidden = !note;
  };

  views.QKWidget = QKWidget;
})(window.reportgenViews);
