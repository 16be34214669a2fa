/*
 * reportgen attention views: the widget behind the head view and the model view of an
 * example page. It holds the state (layer, heads, pinned token, pair filter, top-k,
 * minimum weight, view), builds the toolbar, renders, and reads and writes its deep link.
 * The drawing lives in views-head.js (head view) and views-model.js (model view), which add
 * their methods to ViewsWidget.prototype. Needs views-core.js first.
 */
(function (views) {
  'use strict';

  var el = views.el;
  var button = views.button;
  var labelled = views.labelled;
  var range = views.range;
  var LONG_TOPK = 5;
  var LONG_MIN = 0.02;
  var FILTER_LABELS = { all: 'All', AA: 'A\u2192A', AB: 'A\u2192B', BA: 'B\u2192A', BB: 'B\u2192B' };

  function ViewsWidget(root, data, ownsHash) {
    var started = performance.now();
    this.root = root;
    this.data = data;
    this.ownsHash = ownsHash;
    this.att = new views.Attention(data.attention);
    this.n = this.att.n;
    this.groups = views.pairGroups(data.segments);
    this.isPair = data.segments.indexOf(1) >= 0;
    this.hover = null;
    this.defaults = this.defaultState();
    this.state = this.defaultState();
    this.build();
    if (ownsHash) this.applyHash(false);
    this.render(false);
    views.markFirstRender(root, started);
  }

  ViewsWidget.prototype.defaultState = function () {
    var long = this.n > views.LONG_INPUT;
    return {
      view: 'head',
      layer: 0,
      heads: long ? [0] : range(this.att.heads),
      token: null, // pinned query token (left column)
      key: null, // pinned key token (right column)
      filter: 'all',
      topk: long ? LONG_TOPK : this.n,
      min: long ? LONG_MIN : 0,
      zoom: false,
    };
  };

  // Sets one state field and renders; the handler of most controls.
  ViewsWidget.prototype.setter = function (field, value) {
    var self = this;
    return function () {
      self.state[field] = value;
      self.render(true);
    };
  };

  ViewsWidget.prototype.build = function () {
    var self = this;
    this.root.classList.add('rgv-ready');
    var bar = el('div', 'rgv-toolbar');
    bar.appendChild(this.buildTabs());
    bar.appendChild(this.buildLayerSelect());
    this.filterButtons = {};
    if (this.isPair) bar.appendChild(this.buildFilters());
    this.buildLimits(bar);
    bar.appendChild(views.copyControl(function () { return self.hashText(); }));
    this.root.appendChild(bar);
    this.root.appendChild(this.buildHeadToggles());
    this.buildPanels();
  };

  ViewsWidget.prototype.buildTabs = function () {
    var self = this;
    var tabs = views.group('rgv-tabs');
    this.tabs = {};
    [['head', 'Head view'], ['model', 'Model view']].forEach(function (tab) {
      var node = button('rgv-tab', tab[1]);
      node.setAttribute('data-view', tab[0]);
      node.addEventListener('click', self.setter('view', tab[0]));
      self.tabs[tab[0]] = node;
      tabs.appendChild(node);
    });
    return tabs;
  };

  ViewsWidget.prototype.buildLayerSelect = function () {
    var self = this;
    this.layerSelect = views.numberedSelect('rgv-layer', this.att.layers, 'Layer');
    this.layerSelect.addEventListener('change', function () {
      self.state.layer = parseInt(self.layerSelect.value, 10);
      self.render(true);
    });
    return labelled('Layer', this.layerSelect);
  };

  // Sentence-pair filter: which lines to keep by the sentences of their two ends.
  ViewsWidget.prototype.buildFilters = function () {
    var self = this;
    var filters = views.group('rgv-filter', 'sentence pair filter (attending \u2192 attended)');
    views.FILTERS.forEach(function (filter) {
      var node = button('rgv-filter-btn', FILTER_LABELS[filter]);
      node.setAttribute('data-filter', filter);
      node.addEventListener('click', self.setter('filter', filter));
      self.filterButtons[filter] = node;
      filters.appendChild(node);
    });
    return filters;
  };

  // Top-k per token and minimum weight: what keeps long inputs readable (and fast).
  ViewsWidget.prototype.buildLimits = function (bar) {
    var self = this;
    this.topkInput = numberInput('rgv-topk', '1', String(this.n));
    this.topkInput.addEventListener('change', function () {
      var value = parseInt(self.topkInput.value, 10);
      self.state.topk = isFinite(value) ? Math.max(1, Math.min(self.n, value)) : self.defaults.topk;
      self.render(true);
    });
    bar.appendChild(labelled('Top-k per token', this.topkInput));
    this.minInput = numberInput('rgv-min', '0', '1');
    this.minInput.step = '0.01';
    this.minInput.addEventListener('change', function () {
      var value = parseFloat(self.minInput.value);
      self.state.min = isFinite(value) ? Math.max(0, Math.min(1, value)) : self.defaults.min;
      self.render(true);
    });
    bar.appendChild(labelled('Min weight', this.minInput));
  };

  function numberInput(className, min, max) {
    var input = el('input', className);
    input.type = 'number';
    input.min = min;
    input.max = max;
    return input;
  }

  ViewsWidget.prototype.buildHeadToggles = function () {
    var self = this;
    var heads = views.group('rgv-heads', 'heads');
    this.headButtons = range(this.att.heads).map(function (h) {
      var node = button('rgv-head-toggle', String(h), 'Head ' + h + ' (click: toggle, double-click: only this head)');
      node.setAttribute('data-head', String(h));
      node.style.setProperty('--rgv-head', views.headColour(h, self.att.heads));
      node.addEventListener('click', function () { self.toggleHead(h); });
      node.addEventListener('dblclick', function () {
        self.state.heads = [h];
        self.render(true);
      });
      heads.appendChild(node);
      return node;
    });
    var all = button('rgv-heads-all', 'All');
    all.addEventListener('click', function () {
      self.state.heads = range(self.att.heads);
      self.render(true);
    });
    var none = button('rgv-heads-none', 'None');
    none.addEventListener('click', function () {
      self.state.heads = [];
      self.render(true);
    });
    heads.appendChild(all);
    heads.appendChild(none);
    return heads;
  };

  // The head view's panel, the model view's panel with its zoom box, and the status line.
  ViewsWidget.prototype.buildPanels = function () {
    this.headPanel = el('div', 'rgv-panel rgv-head-panel');
    this.modelPanel = el('div', 'rgv-panel rgv-model-panel');
    this.zoom = el('div', 'rgv-zoom');
    this.zoomTitle = el('span', 'rgv-zoom-title');
    var close = button('rgv-zoom-close', 'Close', 'Back to the grid');
    close.addEventListener('click', this.setter('zoom', false));
    var zoomBar = el('div', 'rgv-zoom-bar');
    zoomBar.appendChild(this.zoomTitle);
    zoomBar.appendChild(close);
    this.zoom.appendChild(zoomBar);
    this.modelPanel.appendChild(this.zoom);
    this.grid = null; // built when the model view is first shown
    this.stage = this.buildStage();
    this.root.appendChild(this.headPanel);
    this.root.appendChild(this.modelPanel);
    this.status = el('p', 'rgv-status');
    this.status.setAttribute('aria-live', 'polite');
    this.root.appendChild(this.status);
  };

  ViewsWidget.prototype.toggleHead = function (h) {
    var i = this.state.heads.indexOf(h);
    if (i >= 0) this.state.heads.splice(i, 1);
    else this.state.heads.push(h);
    this.state.heads.sort(function (a, b) { return a - b; });
    this.render(true);
  };

  ViewsWidget.prototype.syncControls = function () {
    var st = this.state;
    var self = this;
    Object.keys(this.tabs).forEach(function (view) {
      self.tabs[view].setAttribute('aria-pressed', String(st.view === view));
    });
    this.layerSelect.value = String(st.layer);
    this.headButtons.forEach(function (node, h) {
      node.setAttribute('aria-pressed', String(st.heads.indexOf(h) >= 0));
    });
    Object.keys(this.filterButtons).forEach(function (filter) {
      self.filterButtons[filter].setAttribute('aria-pressed', String(st.filter === filter));
    });
    this.topkInput.value = String(st.topk);
    this.minInput.value = String(st.min);
  };

  ViewsWidget.prototype.render = function (fromUser) {
    var st = this.state;
    this.syncControls();
    var zoomed = st.view === 'model' && st.zoom;
    this.headPanel.hidden = st.view !== 'head';
    this.modelPanel.hidden = st.view !== 'model';
    this.zoom.hidden = !zoomed;
    if (st.view === 'head' && this.stage.parentNode !== this.headPanel) this.headPanel.appendChild(this.stage);
    if (zoomed && this.stage.parentNode !== this.zoom) this.zoom.appendChild(this.stage);
    if (zoomed) {
      var heads = (st.heads.length === 1 ? ' ' : 's ') + st.heads.join(', ');
      this.zoomTitle.textContent = 'Layer ' + st.layer + ', head' + heads;
    }
    if (st.view === 'head' || zoomed) this.drawStage();
    else this.status.textContent = 'Click a head to enlarge it';
    if (st.view === 'model') this.drawGrid();
    var text = this.hashText();
    this.root.setAttribute('data-rgv-state', text);
    if (fromUser && this.ownsHash) views.writeHash(text);
  };

  // The deep link of the current state; fields at their defaults are left out.
  ViewsWidget.prototype.hashText = function () {
    var st = this.state;
    var placed = st.view === 'head' || st.zoom;
    return views.formatHash({
      view: st.view,
      layer: placed ? st.layer : null,
      head: placed ? st.heads : null,
      token: st.token,
      key: st.key,
      filter: st.filter !== 'all' ? st.filter : null,
      topk: st.topk !== this.defaults.topk ? st.topk : null,
      min: st.min !== this.defaults.min ? st.min : null,
    });
  };

  // Restores the state a link describes; fields it does not give keep their defaults.
  ViewsWidget.prototype.applyHash = function (rerender) {
    var link = views.readHash({ layers: this.att.layers, heads: this.att.heads, tokens: this.n });
    if (!link) return;
    var st = this.defaultState();
    if (link.view === 'head' || link.view === 'model') st.view = link.view;
    if (link.layer !== null) st.layer = link.layer;
    if (link.heads !== null) st.heads = link.heads;
    st.zoom = st.view === 'model' && link.layer !== null && link.heads !== null;
    st.token = link.token;
    st.key = st.token === null ? link.key : null;
    if (link.filter !== null && this.isPair) st.filter = link.filter;
    if (link.topk !== null) st.topk = link.topk;
    if (link.min !== null) st.min = link.min;
    this.state = st;
    this.hover = null;
    if (rerender) this.render(false);
  };

  views.ViewsWidget = ViewsWidget;
})(window.reportgenViews);
