/*
 * reportgen attention views: the query/key view of an example's q/k page. For one query
 * token and one (layer, head) it shows, for every key, the key vector, the elementwise
 * product with the query, q . k, the scaled score, its softmax and the model's own weight,
 * so a reader can follow how attention is computed. Needs views-core.js first.
 */
(function (views) {
  'use strict';

  var el = views.el;
  var COLUMNS = ['key', 'k (key vector)', 'q \u00d7 k (elementwise)', 'q \u00b7 k', 'q \u00b7 k \u00d7 scale',
    'softmax', 'model'];

  // Red for positive, blue for negative, more opaque the larger |v| is against maxAbs.
  function vectorColour(value, maxAbs) {
    var t = maxAbs > 0 ? Math.min(1, Math.abs(value) / maxAbs) : 0;
    return value >= 0 ? 'rgba(214, 39, 40, ' + t.toFixed(3) + ')' : 'rgba(31, 119, 180, ' + t.toFixed(3) + ')';
  }

  function QKWidget(root, data, ownsHash) {
    var started = performance.now();
    this.root = root;
    this.data = data;
    this.ownsHash = ownsHash;
    this.att = new views.Attention(data.attention);
    this.n = this.att.n;
    this.dim = data.head_dim;
    this.cache = new Map();
    var firstWord = data.special.indexOf(0);
    this.state = { layer: 0, head: 0, token: firstWord >= 0 ? firstWord : 0 };
    this.build();
    if (ownsHash) this.applyHash(false);
    this.render(false);
    views.markFirstRender(root, started);
  }

  // The float32 query and key vectors of one (layer, head), [n * dim] each, decoded once.
  QKWidget.prototype.vectors = function (layer, head) {
    var id = layer * this.att.heads + head;
    if (!this.cache.has(id)) {
      this.cache.set(id, { q: views.base64Float32(this.data.queries[id]), k: views.base64Float32(this.data.keys[id]) });
    }
    return this.cache.get(id);
  };

  QKWidget.prototype.build = function () {
    this.root.classList.add('rgv-ready', 'rgv-qk');
    this.root.appendChild(this.buildToolbar());
    this.root.appendChild(this.buildTokenStrip());
    this.queryLine = el('div', 'rgv-qk-query');
    this.root.appendChild(this.queryLine);
    var table = el('table', 'rgv-qk-table');
    var head = el('tr');
    COLUMNS.forEach(function (title) { head.appendChild(el('th', null, title)); });
    var thead = el('thead');
    thead.appendChild(head);
    table.appendChild(thead);
    this.tbody = el('tbody');
    table.appendChild(this.tbody);
    var wrap = el('div', 'rgv-qk-wrap');
    wrap.appendChild(table);
    this.root.appendChild(wrap);
    this.note = el('p', 'rgv-status');
    this.root.appendChild(this.note);
  };

  QKWidget.prototype.buildToolbar = function () {
    var self = this;
    var bar = el('div', 'rgv-toolbar');
    this.layerSelect = views.numberedSelect('rgv-layer', this.att.layers, 'Layer');
    this.headSelect = views.numberedSelect('rgv-head', this.att.heads, 'Head');
    this.layerSelect.addEventListener('change', function () {
      self.state.layer = parseInt(self.layerSelect.value, 10);
      self.render(true);
    });
    this.headSelect.addEventListener('change', function () {
      self.state.head = parseInt(self.headSelect.value, 10);
      self.render(true);
    });
    bar.appendChild(views.labelled('Layer', this.layerSelect));
    bar.appendChild(views.labelled('Head', this.headSelect));
    bar.appendChild(views.copyControl(function () { return self.hashText(); }));
    return bar;
  };

  // The query token buttons.
  QKWidget.prototype.buildTokenStrip = function () {
    var self = this;
    var strip = views.group('rgv-qk-tokens', 'query token');
    this.tokenButtons = this.data.tokens.map(function (tok, i) {
      var node = views.button('rgv-qk-token', tok, 'query token #' + i);
      node.setAttribute('data-i', String(i));
      node.addEventListener('click', function () {
        self.state.token = i;
        self.render(true);
      });
      strip.appendChild(node);
      return node;
    });
    return strip;
  };

  // A vector as a strip of coloured cells, values[offset .. offset + dim).
  QKWidget.prototype.strip = function (values, offset, maxAbs) {
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

  QKWidget.prototype.render = function (fromUser) {
    var st = this.state;
    var vec = this.vectors(st.layer, st.head);
    var table = views.queryKeyRows(vec.q, vec.k, st.token, this.dim, this.data.scaling);
    var model = this.att.matrix(st.layer, st.head);
    this.layerSelect.value = String(st.layer);
    this.headSelect.value = String(st.head);
    this.tokenButtons.forEach(function (node, i) { node.setAttribute('aria-pressed', String(i === st.token)); });
    this.queryLine.textContent = '';
    this.queryLine.appendChild(el('span', 'rgv-qk-label', 'q of #' + st.token + ' '));
    this.queryLine.appendChild(el('span', 'rgv-tok-text', this.data.tokens[st.token]));
    this.queryLine.appendChild(this.strip(vec.q, st.token * this.dim, table.maxAbs));
    var frag = document.createDocumentFragment();
    var worst = 0;
    for (var k = 0; k < this.n; k++) {
      var weight = model[st.token * this.n + k];
      worst = Math.max(worst, Math.abs(table.softmax[k] - weight));
      frag.appendChild(this.tableRow(k, vec.k, table, weight));
    }
    this.tbody.textContent = '';
    this.tbody.appendChild(frag);
    this.note.textContent = this.noteText(worst);
    var text = this.hashText();
    this.root.setAttribute('data-rgv-state', text);
    if (fromUser && this.ownsHash) views.writeHash(text);
  };

  // Key k's row: its vector, the products with the query, the dot product, score, softmax and model weight.
  QKWidget.prototype.tableRow = function (k, keys, table, weight) {
    var dim = this.dim;
    var scaling = this.data.scaling;
    var dot = table.dots[k];
    var soft = table.softmax[k];
    var tr = el('tr', 'rgv-qk-row');
    tr.setAttribute('data-k', String(k));
    tr.setAttribute('data-dot', String(dot));
    tr.setAttribute('data-score', String(dot * scaling));
    tr.setAttribute('data-softmax', String(soft));
    tr.setAttribute('data-model', String(weight));
    var tokCell = el('td', 'rgv-tok-text', this.data.tokens[k]);
    tokCell.title = '#' + k;
    tr.appendChild(tokCell);
    tr.appendChild(el('td')).appendChild(this.strip(keys, k * dim, table.maxAbs));
    tr.appendChild(el('td')).appendChild(this.strip(table.products, k * dim, table.maxProduct));
    tr.appendChild(el('td', 'rgv-number', dot.toFixed(3)));
    tr.appendChild(el('td', 'rgv-number', (dot * scaling).toFixed(3)));
    var softCell = el('td', 'rgv-number rgv-soft');
    var bar = el('span', 'rgv-bar');
    bar.style.width = (soft * 100).toFixed(1) + '%';
    softCell.appendChild(bar);
    softCell.appendChild(el('span', null, soft.toFixed(4)));
    tr.appendChild(softCell);
    tr.appendChild(el('td', 'rgv-number', weight.toFixed(4)));
    return tr;
  };

  // The status line: what the table computes and how far it is from the model's stored weights.
  QKWidget.prototype.noteText = function (worst) {
    var st = this.state;
    return 'Layer ' + st.layer + ', head ' + st.head + ', query #' + st.token +
      ': softmax(q \u00b7 k \u00d7 ' + this.data.scaling.toPrecision(4) + ') over ' + this.n +
      ' keys; largest difference from the model\u2019s stored weights ' + worst.toExponential(1) +
      (worst > 0.01 ? ' (this model adds terms beyond q \u00b7 k, e.g. relative positions)' : ' (8-bit page encoding)');
  };

  QKWidget.prototype.hashText = function () {
    return views.formatHash({ view: 'qk', layer: this.state.layer, head: this.state.head, token: this.state.token });
  };

  QKWidget.prototype.applyHash = function (rerender) {
    var link = views.readHash({ layers: this.att.layers, heads: this.att.heads, tokens: this.n });
    if (!link) return;
    if (link.layer !== null) this.state.layer = link.layer;
    if (link.head !== null) this.state.head = link.head;
    if (link.token !== null) this.state.token = link.token;
    if (rerender) this.render(false);
  };

  views.QKWidget = QKWidget;
})(window.reportgenViews);
