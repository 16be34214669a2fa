/*
 * reportgen attention views: the widget behind the head view and the model view of an
 * example page. It holds the state (layer, heads, pinned token, pair filter, top-k,
 * minimum weight, view, weights or contributions), builds the toolbar, renders, and reads and
 * writes its deep link.
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
  var LOADING_NOTE_MS = 100; // a data file still loading after this long is said on the page (waitForData)
  var STILL_PX = 8; // px: a pointer that moved less than this has not moved (a tremor)
  var FILTER_LABELS = { all: 'All', AA: 'A\u2192A', AB: 'A\u2192B', BA: 'B\u2192A', BB: 'B\u2192B' };
  var MODE_TITLES = {
    weights: 'Attention weights: where each token looks',
    contributions: 'Contributions (Kobayashi et al. 2020): what each token passes on through the head, ||A f||',
  };
  // Said once, above the views of a page with contributions: what the numbers are, and their units. Both fit
  // two lines of a laptop's toolbar width (views.css keeps that room), so flipping the switch moves nothing.
  var MODE_NOTES = {
    weights: 'Showing attention weights: how much each token on the left looks at each token on the right ' +
      '(each row sums to 1).',
    contributions: 'Showing contributions (Kobayashi et al. 2020): the share of what a token on the left receives ' +
      'through the head that comes from each token on the right, ||A[i, j] f(x_j)||; tooltips give ||A f|| itself, ' +
      'in the units of the model\u2019s hidden vectors.',
  };
  // An encoder-decoder's groups (views-core.js groupOf): the switch's labels and tooltips, by group name.
  var GROUP_LABELS = { encoder: 'Encoder', decoder: 'Decoder', cross: 'Cross' };
  var GROUP_TITLES = {
    encoder: 'Encoder self-attention: the source attending to itself',
    decoder: 'Decoder self-attention: the decoder\u2019s inputs attending to themselves and those before them',
    cross: 'Cross-attention: the decoder\u2019s inputs (left) attending to the source (right)',
  };

  function ViewsWidget(root, data, ownsHash) {
    var started = performance.now();
    this.root = root;
    this.data = data;
    this.ownsHash = ownsHash;
    this.groupNames = data.groups ? data.groups.map(function (group) { return group.name; }) : null;
    this.useGroup(views.groupOf(data, null));
    this.hover = null;
    this.defaults = this.defaultState();
    this.state = this.defaultState();
    this.build();
    if (ownsHash) this.applyHash(false);
    this.render(false);
    views.markFirstRender(root, started);
  }

  /*
   * Takes one group of the payload (views-core.js groupOf) as what the views draw: its attention and
   * contributions, its query tokens (n, the left column) and key tokens (m, the right column). A payload
   * without groups is one group, its tokens on both sides (m = n); an encoder-decoder's switch changes group.
   */
  ViewsWidget.prototype.useGroup = function (group) {
    this.group = group;
    // matrices the page computed itself (the "Your sentence" page) come as a source already
    this.att = group.attention instanceof views.MatrixSource ? group.attention : new views.Attention(group.attention);
    var contributions = group.contributions;
    this.contrib = !contributions ? null : contributions.encoding === 'norms-f32'
      ? new views.NormContributions(this.att, contributions) : new views.Attention(contributions, 'c-');
    this.n = this.att.n;
    this.m = this.att.m;
    this.queryTokens = group.queries;
    this.keyTokens = group.keys;
    this.querySpecial = group.querySpecial;
    this.keySpecial = group.keySpecial;
    this.causal = group.causal;
    var segments = this.groupNames ? range(Math.max(this.n, this.m)).map(function () { return 0; }) : this.data.segments;
    this.groups = views.pairGroups(segments);
    this.isPair = segments.indexOf(1) >= 0;
  };

  ViewsWidget.prototype.defaultState = function () {
    var long = Math.max(this.n, this.m) > views.LONG_INPUT;
    return {
      view: this.root.getAttribute('data-rgv-view') === 'model' ? 'model' : 'head', // a notebook's model_view
      attn: this.group.name, // the group drawn (an encoder-decoder's); null for any other payload
      layer: 0,
      heads: long ? [0] : range(this.att.heads),
      token: null, // pinned query token (left column)
      key: null, // pinned key token (right column)
      filter: 'all',
      topk: long ? LONG_TOPK : this.m,
      min: long ? LONG_MIN : 0,
      mode: 'weights',
      zoom: false,
      win: null, // a long input's heatmap window (views-heatmap.js): null for the whole head
    };
  };

  // The matrices drawn: the attention, or its contributions (same interface; views-core.js Attention).
  ViewsWidget.prototype.source = function () {
    return this.state.mode === 'contributions' && this.contrib ? this.contrib : this.att;
  };

  // What a link is checked against (views-core.js parseHash).
  ViewsWidget.prototype.limits = function () {
    var limits = { layers: this.att.layers, heads: this.att.heads, tokens: this.n, contributions: Boolean(this.contrib) };
    if (this.groupNames) {
      limits.keys = this.m;
      limits.groups = this.groupNames;
    }
    return limits;
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
    this.groupButtons = [];
    if (this.groupNames) bar.appendChild(this.buildGroupSwitch());
    this.modeButtons = [];
    if (this.contrib) bar.appendChild(this.buildModeSwitch());
    bar.appendChild(this.buildLayerSelect());
    this.filterButtons = {};
    if (this.isPair) bar.appendChild(this.buildFilters());
    this.buildLimits(bar);
    bar.appendChild(views.copyControl(function () { return self.hashText(); }));
    this.qkLink = this.buildQKLink();
    if (this.qkLink) bar.appendChild(this.qkLink);
    this.root.appendChild(bar);
    this.root.appendChild(this.buildNote());
    this.modeNote = this.contrib ? this.root.appendChild(el('p', 'rgv-mode-note')) : null;
    this.headToggles = this.root.appendChild(this.buildHeadToggles());
    this.buildPanels();
    this.watchPointer();
    // Escape clears a pinned token, unless the enlarged-head dialog is open: there Escape closes the
    // dialog at the first press, whatever is pinned (issue 28), and the pin stays in the address.
    this.root.addEventListener('keydown', function (event) {
      if (event.key !== 'Escape' || self.zoomShown) return;
      if (self.unpin()) {
        event.preventDefault();
        event.stopPropagation(); // a first Escape clears the pin, a second one may close what holds the view
      }
    });
    window.addEventListener('resize', function () { self.updateScrollHint(); });
  };

  // A link to the example's query/key page (named by the page in data-qk-href; none without it),
  // carrying the layer, the first selected head and the pinned query token; render() keeps it current.
  ViewsWidget.prototype.buildQKLink = function () {
    var page = this.root.getAttribute('data-qk-href');
    if (!page) return null;
    this.qkPage = page.split('#')[0];
    var link = el('a', 'rgv-qk-link', 'Query/key view');
    link.title = 'How this head computes its weights: queries, keys and their softmax';
    return link;
  };

  ViewsWidget.prototype.qkHref = function () {
    var st = this.state;
    return this.qkPage + '#' + views.formatHash({
      view: 'qk', layer: st.layer, head: st.heads.length ? st.heads[0] : null, token: st.token,
    });
  };

  // What a link asked for that this view cannot show, and what it shows instead (hidden when nothing).
  ViewsWidget.prototype.buildNote = function () {
    var self = this;
    this.note = el('p', 'rgv-hash-note');
    this.note.setAttribute('role', 'status');
    this.note.hidden = true;
    this.noteText = el('span', 'rgv-hash-note-text');
    var close = button('rgv-hash-note-close', '\u00d7', 'Dismiss this note');
    close.setAttribute('aria-label', 'Dismiss this note');
    close.addEventListener('click', function () { self.showNote(''); });
    this.note.appendChild(this.noteText);
    this.note.appendChild(close);
    return this.note;
  };

  ViewsWidget.prototype.showNote = function (text) {
    this.noteText.textContent = text;
    this.note.hidden = !text;
  };

  // On a narrow screen the head view scrolls sideways inside its panel: say so above it.
  ViewsWidget.prototype.updateScrollHint = function () {
    var panel = this.headPanel;
    var scrolls = !panel.hidden && panel.scrollWidth > panel.clientWidth + 1;
    this.scrollHint.hidden = !scrolls;
    panel.classList.toggle('rgv-scrolls', scrolls);
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

  /*
   * Show: weights | contributions, two buttons in a labelled group (aria-pressed, each a Tab stop). Only on
   * pages with contributions; the enlarged head's bar gets one too (views-model.js), kept in step by syncControls.
   */
  ViewsWidget.prototype.buildModeSwitch = function () {
    var self = this;
    var wrap = views.group('rgv-mode', 'Show');
    wrap.appendChild(el('span', 'rgv-field-label', 'Show'));
    views.MODES.forEach(function (mode) {
      var node = button('rgv-mode-btn', mode, MODE_TITLES[mode]);
      node.setAttribute('data-mode', mode);
      node.addEventListener('click', self.setter('mode', mode));
      self.modeButtons.push(node);
      wrap.appendChild(node);
    });
    return wrap;
  };

  /*
   * Attention: Encoder | Decoder | Cross, an encoder-decoder's groups (only where the payload has them), built
   * like the mode switch. A choice redraws the views from that group's data and goes into the link (attn=).
   */
  ViewsWidget.prototype.buildGroupSwitch = function () {
    var self = this;
    var wrap = views.group('rgv-mode rgv-attn', 'Attention');
    wrap.appendChild(el('span', 'rgv-field-label', 'Attention'));
    this.groupNames.forEach(function (name) {
      var node = button('rgv-mode-btn rgv-attn-btn', GROUP_LABELS[name] || name, GROUP_TITLES[name]);
      node.setAttribute('data-attn', name);
      node.addEventListener('click', function () {
        self.switchGroup(name);
        self.render(true);
      });
      self.groupButtons.push(node);
      wrap.appendChild(node);
    });
    return wrap;
  };

  /*
   * Draws the group `name` from now on: its data, then the parts built from its sizes (the layer select, the
   * head toggles, the head view's columns, the model view's grid, built again when next shown). The layer
   * and the heads stay where the group has them; pins are cleared (a token number means another token
   * there), and top-k at its default follows the group's number of keys.
   */
  ViewsWidget.prototype.switchGroup = function (name) {
    if (!this.groupNames || this.group.name === name) return;
    var st = this.state;
    var wasDefault = st.topk === this.defaults.topk && st.min === this.defaults.min;
    var allHeads = st.heads.length === this.att.heads;
    this.useGroup(views.groupOf(this.data, name));
    this.defaults = this.defaultState();
    st.attn = this.group.name;
    st.layer = st.layer < this.att.layers ? st.layer : 0;
    var heads = this.att.heads;
    st.heads = allHeads ? range(heads) : st.heads.filter(function (h) { return h < heads; });
    st.token = st.key = null;
    if (wasDefault) {
      st.topk = this.defaults.topk;
      st.min = this.defaults.min;
    }
    st.topk = Math.min(st.topk, this.m);
    if (!this.contrib) st.mode = 'weights';
    this.hover = null;
    this.rebuildForGroup();
  };

  ViewsWidget.prototype.rebuildForGroup = function () {
    var select = views.numberedSelect('rgv-layer', this.att.layers, 'Layer');
    this.layerSelect.textContent = '';
    while (select.firstChild) this.layerSelect.appendChild(select.firstChild);
    var toggles = this.buildHeadToggles();
    this.headToggles.parentNode.replaceChild(toggles, this.headToggles);
    this.headToggles = toggles;
    this.topkInput.max = String(this.m);
    var stage = this.buildStage();
    if (this.stage.parentNode) this.stage.parentNode.replaceChild(stage, this.stage); // placed by the first render
    this.stage = stage;
    if (this.grid) this.dropGrid(); // views-model.js
  };

  ViewsWidget.prototype.buildLayerSelect = function () {
    this.layerSelect = views.stateSelect(this, 'layer', 'rgv-layer', this.att.layers, 'Layer');
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
    this.topkInput = numberInput('rgv-topk', '1', String(this.m));
    this.topkInput.addEventListener('change', function () {
      var value = parseInt(self.topkInput.value, 10);
      self.state.topk = isFinite(value) ? Math.max(1, Math.min(self.m, value)) : self.defaults.topk;
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
    var field = labelled('Min weight', this.minInput);
    this.minLabel = field.firstChild; // "Min share" while the views show contributions
    bar.appendChild(field);
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
    this.zoom = this.buildZoom(); // views-model.js: the dialog an enlarged head opens in
    this.modelPanel.appendChild(this.zoom);
    this.grid = null; // built when the model view is first shown
    this.stage = this.buildStage();
    this.scrollHint = el('p', 'rgv-scroll-hint', 'Wider than the screen: scroll the view sideways \u2194');
    this.scrollHint.hidden = true;
    this.root.appendChild(this.scrollHint);
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
    this.modeButtons.forEach(function (node) {
      node.setAttribute('aria-pressed', String(node.getAttribute('data-mode') === st.mode));
    });
    this.groupButtons.forEach(function (node) {
      node.setAttribute('aria-pressed', String(node.getAttribute('data-attn') === st.attn));
    });
    this.minLabel.textContent = st.mode === 'contributions' ? 'Min share' : 'Min weight';
    if (this.modeNote) this.modeNote.textContent = MODE_NOTES[st.mode];
  };

  ViewsWidget.prototype.render = function (fromUser) {
    var st = this.state;
    this.syncControls();
    if (this.waitForData(fromUser)) return;
    var zoomed = st.view === 'model' && st.zoom;
    this.root.setAttribute('data-rgv-view', st.view); // views.css hides the head toggles in the model view
    this.root.setAttribute('data-rgv-mode', st.mode);
    if (this.groupNames) this.root.setAttribute('data-rgv-attn', st.attn);
    this.headPanel.hidden = st.view !== 'head';
    this.modelPanel.hidden = st.view !== 'model';
    if (st.view === 'head' && this.stage.parentNode !== this.headPanel) this.headPanel.appendChild(this.stage);
    if (st.view === 'model') this.drawGrid();
    this.placeZoom(zoomed); // views-model.js: opens or closes the enlarged head's dialog
    if (st.view === 'head' || zoomed) this.drawStage();
    else this.status.textContent = 'Click a head to enlarge it, or a row\'s label to select its layer';
    var text = this.hashText();
    this.root.setAttribute('data-rgv-state', text);
    if (this.qkLink) this.qkLink.setAttribute('href', this.qkHref());
    this.updateScrollHint();
    if (fromUser && this.ownsHash) views.writeHash(text);
    views.announceRender(this.root); // an open copy-link box takes the new address
  };

  /*
   * A site's page keeps the heads its first view does not draw in data files (views-core.js DataFiles): other
   * layers, and every contribution. Until the heads this state draws are in (the model view draws them all, a
   * layer change or a link another layer's, the switch their contributions), the view keeps what it shows and
   * renders again when they are; data-rgv-loading (a test hook) says what is loading meanwhile. Only a load
   * that takes longer than LOADING_NOTE_MS says so on the page, dimming the panels (views.css .rgv-waiting) and
   * making them inert: a file from disk is in within a few ms, and dimming a head view of thousands of lines
   * and lighting it again costs more than the load (issue 32). Hover and focus draw nothing meanwhile (preview).
   */
  ViewsWidget.prototype.waitForData = function (fromUser) {
    var self = this;
    var st = this.state;
    var shown = st.heads.map(function (h) { return [st.layer, h]; });
    // The model view waits for every head, except a long input's: each of its thumbnails loads its own head, one
    // after another, and lets it go once drawn (views-model.js), so a 4,096-token page never holds every head.
    var pairs = st.view !== 'model' ? shown : views.isLong(this.n, this.m) ? (st.zoom ? shown : []) : this.att.allHeads();
    var loading = this.source().ensure(pairs, function (error) {
      clearTimeout(self.noteTimer);
      self.root.removeAttribute('data-rgv-loading');
      self.root.classList.remove('rgv-waiting');
      self.headPanel.inert = self.modelPanel.inert = false;
      if (error) self.status.textContent = error.message;
      else self.render(false);
    });
    if (!loading) return false;
    this.root.setAttribute('data-rgv-loading', loading);
    clearTimeout(this.noteTimer);
    this.noteTimer = setTimeout(function () {
      if (!self.root.hasAttribute('data-rgv-loading')) return;
      self.root.classList.add('rgv-waiting');
      self.headPanel.inert = self.modelPanel.inert = true; // no click reaches heads that are not in yet
      self.status.textContent = self.root.getAttribute('data-rgv-loading');
    }, LOADING_NOTE_MS);
    if (fromUser && this.ownsHash) views.writeHash(this.hashText());
    return true;
  };

  // Whether a data file is loading (waitForData): hover and focus then leave the drawing as it is.
  ViewsWidget.prototype.isLoading = function () {
    return this.root.hasAttribute('data-rgv-loading');
  };

  // The deep link of the current state; fields at their defaults are left out.
  ViewsWidget.prototype.hashText = function () {
    var st = this.state;
    var placed = st.view === 'head' || st.zoom;
    return views.formatHash({
      view: st.view,
      attn: this.groupNames && st.attn !== this.groupNames[0] ? st.attn : null,
      layer: st.layer, // the model view highlights its layer's row
      head: placed ? st.heads : null,
      token: st.token,
      key: st.key,
      filter: st.filter !== 'all' ? st.filter : null,
      topk: st.topk !== this.defaults.topk ? st.topk : null,
      min: st.min !== this.defaults.min ? st.min : null,
      mode: st.mode !== 'weights' ? st.mode : null,
      win: st.win && this.heat ? views.windowText(st.win) : null,
    });
  };

  // Restores the state a link describes; fields it does not give keep their defaults.
  /*
   * Opening the enlarged-head dialog, or a link that scrolls the view, puts tokens under a pointer that
   * has not moved, and browsers then report the pointer as over a token, which would switch the view to
   * that token's lines (and hide a pinned one). Pointer events in the view are held back until the
   * pointer moves STILL_PX from where it was; views.css drops the hover highlight meanwhile.
   */
  ViewsWidget.prototype.watchPointer = function () {
    var self = this;
    var track = function (event) { self.lastPointer = { x: event.clientX, y: event.clientY }; };
    document.addEventListener('pointermove', track, { passive: true });
    document.addEventListener('pointerdown', track, { passive: true }); // a tap or a click on a link
    var hold = function (event) {
      var anchor = self.pointerAnchor;
      if (anchor === undefined) return;
      if (anchor === null) {
        self.pointerAnchor = { x: event.clientX, y: event.clientY };
      } else if (Math.abs(event.clientX - anchor.x) + Math.abs(event.clientY - anchor.y) >= STILL_PX) {
        self.pointerAnchor = undefined;
        self.root.classList.remove('rgv-holding');
        return;
      }
      event.stopPropagation();
    };
    ['pointerover', 'pointerenter', 'pointermove', 'mouseover', 'mouseenter', 'mousemove'].forEach(function (type) {
      self.root.addEventListener(type, hold, true);
    });
  };

  ViewsWidget.prototype.holdPointer = function () {
    this.pointerAnchor = this.lastPointer || null;
    this.root.classList.add('rgv-holding');
  };

  ViewsWidget.prototype.applyHash = function (rerender) {
    if (this.groupNames) { // the group first: the link's other fields are checked against its sizes
      var asked = views.hashGroup(location.hash, this.groupNames);
      if (views.parseHash(location.hash, this.limits())) this.switchGroup(asked || this.groupNames[0]);
    }
    var link = views.readHash(this.limits());
    if (!link) return;
    var st = this.defaultState();
    var problems = link.problems.slice();
    if (link.view === 'head' || link.view === 'model') st.view = link.view;
    else if (link.view !== null) problems.unshift({ field: 'view', given: link.view.slice(0, 24) });
    if (link.layer !== null) st.layer = link.layer;
    var badHeads = problems.some(function (problem) { return problem.field === 'head'; });
    if (link.heads !== null && (link.heads.length || !badHeads)) st.heads = link.heads; // head=abc: the default heads
    st.zoom = st.view === 'model' && link.layer !== null && link.heads !== null;
    st.token = link.token;
    st.key = st.token === null ? link.key : null;
    if (link.filter !== null && this.isPair) st.filter = link.filter;
    if (link.topk !== null) st.topk = link.topk;
    if (link.min !== null) st.min = link.min;
    if (link.mode !== null) st.mode = link.mode;
    st.win = link.win;
    this.state = st;
    this.hover = null;
    if (rerender) this.holdPointer(); // a link followed on the page scrolls the view under the pointer
    this.showNote(views.hashNote(problems, this.limits(),
      { view: st.view + ' view', layer: st.layer, heads: st.heads, mode: st.mode, attn: st.attn }));
    if (rerender) this.render(false);
  };

  views.ViewsWidget = ViewsWidget;
})(window.reportgenViews);
