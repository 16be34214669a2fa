/*
 * reportgen attention views: head view, model view and query/key view.
 *
 * Written for reportgen (no third-party code). Pages are static and may be opened
 * from file://, so the data is embedded in the page as
 *   <div class="rgv" data-rgv="views|qk"><script type="application/json" class="rgv-data">…</script></div>
 * and nothing is fetched. Every piece of user text (tokens, sentences) reaches the
 * DOM through textContent or setAttribute, never through innerHTML.
 *
 * The first widget on a page owns the URL hash (deep links):
 *   #view=head&layer=2&head=0,3&token=4&filter=AB&topk=5&min=0.02
 *   #view=model&layer=2&head=5          (model view with layer 2 / head 5 enlarged)
 *   #view=qk&layer=2&head=5&token=4     (query/key page)
 *
 * Test hooks: the root gets data-rgv-state (its hash text) after each render and
 * data-first-render-ms after the first; drawn lines are <line class="rgv-line">
 * with data-q/data-k/data-head/data-w; shown weights are <span class="rgv-num">
 * with the same attributes.
 */
(function () {
  'use strict';

  var ROW_H = 20; // px per token row; lines start and end at row centres
  var LINES_W = 220; // px between the two token columns
  var THUMB_W = 60;
  var THUMB_H = 76;
  var LONG_INPUT = 64; // above this many tokens the head view starts sparse (top-k, threshold, one head)
  var LONG_TOPK = 5;
  var LONG_MIN = 0.02;
  var THUMB_MIN = 0.01; // fainter lines are invisible in a thumbnail; skipping them keeps drawing cheap
  var FILTERS = ['all', 'AA', 'AB', 'BA', 'BB'];
  var FILTER_LABELS = { all: 'All', AA: 'A\u2192A', AB: 'A\u2192B', BA: 'B\u2192A', BB: 'B\u2192B' };
  var SVG_NS = 'http://www.w3.org/2000/svg';
  var HASH_KEYS = ['view', 'layer', 'head', 'heads', 'token', 'key', 'filter', 'topk', 'min'];

  // ---------------------------------------------------------------- helpers

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function svgEl(tag, attrs) {
    var node = document.createElementNS(SVG_NS, tag);
    for (var name in attrs) node.setAttribute(name, attrs[name]);
    return node;
  }

  function range(n) {
    var out = [];
    for (var i = 0; i < n; i++) out.push(i);
    return out;
  }

  function button(className, label, title) {
    var b = el('button', className, label);
    b.type = 'button';
    if (title) b.title = title;
    return b;
  }

  function labelled(text, control) {
    var wrap = el('label', 'rgv-field');
    wrap.appendChild(el('span', 'rgv-field-label', text));
    wrap.appendChild(control);
    return wrap;
  }

  function selectOf(className, options) {
    var select = el('select', className);
    options.forEach(function (opt) {
      var o = el('option', null, opt[1]);
      o.value = String(opt[0]);
      select.appendChild(o);
    });
    return select;
  }

  // Each head its own colour: hues spread evenly over the circle for up to 16 heads
  // (a 10-colour palette would repeat), alternating lightness so neighbours differ more.
  function headColour(head, heads) {
    var hue, light;
    if (heads <= 16) {
      hue = (head * 360) / Math.max(heads, 1);
      light = heads > 8 && head % 2 ? 36 : 50;
    } else {
      hue = (head * 137.508) % 360; // golden angle: no two nearby heads share a hue
      light = 36 + (head % 3) * 8;
    }
    return 'hsl(' + hue.toFixed(1) + ', 80%, ' + light + '%)';
  }

  // ------------------------------------------------------------- decoding

  function base64Bytes(text) {
    var bin = atob(text);
    var out = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  function base64Float32(text) {
    var bytes = base64Bytes(text);
    var view = new DataView(bytes.buffer);
    var out = new Float32Array(bytes.length >> 2);
    for (var i = 0; i < out.length; i++) out[i] = view.getFloat32(4 * i, true); // little-endian, as written
    return out;
  }

  /*
   * Attention in the "u8-row-affine" encoding of reportgen/views.py:
   * w[r][k] = floor[r] + code[r][k] * scale[r]. One base64 chunk per (layer, head),
   * decoded on first use; long inputs keep only a few decoded heads (2 MB each at 512 tokens).
   */
  function Attention(enc) {
    if (enc.encoding !== 'u8-row-affine') throw new Error('unknown attention encoding: ' + enc.encoding);
    this.layers = enc.shape[0];
    this.heads = enc.shape[1];
    this.n = enc.shape[2];
    this.chunks = enc.q;
    this.floor = base64Float32(enc.floor);
    this.scale = base64Float32(enc.scale);
    this.cache = new Map();
    this.cacheLimit = this.n * this.n > 100000 ? 8 : Infinity;
  }

  Attention.prototype.matrix = function (layer, head) {
    var id = layer * this.heads + head;
    var m = this.cache.get(id);
    if (m) {
      this.cache.delete(id); // re-insert: Map order doubles as least-recently-used order
      this.cache.set(id, m);
      return m;
    }
    var n = this.n;
    var codes = base64Bytes(this.chunks[id]);
    m = new Float64Array(n * n);
    for (var r = 0; r < n; r++) {
      var f = this.floor[id * n + r];
      var s = this.scale[id * n + r];
      for (var k = 0; k < n; k++) m[r * n + k] = f + codes[r * n + k] * s;
    }
    this.cache.set(id, m);
    if (this.cache.size > this.cacheLimit) this.cache.delete(this.cache.keys().next().value);
    return m;
  };

  // Sentence of each token for the pair filter. Special tokens join the sentence
  // before them ([CLS] and the middle [SEP] go with A, the last [SEP] with B), as in bertviz.
  function pairGroups(segments) {
    var group = 0;
    return segments.map(function (s) {
      if (s === 0 || s === 1) group = s;
      return group ? 'B' : 'A';
    });
  }

  // Keys q attends to, largest first: at most topk of them, each >= min and allowed by the filter.
  function pickKeys(m, n, q, topk, min, allow) {
    var picked = [];
    var row = q * n;
    for (var k = 0; k < n; k++) {
      var w = m[row + k];
      if (w < min || !allow(q, k)) continue;
      if (picked.length < topk) {
        picked.push(k);
      } else if (w > m[row + picked[picked.length - 1]]) {
        picked[picked.length - 1] = k;
      } else {
        continue;
      }
      // keep `picked` sorted by weight, descending (k is small, insertion is enough)
      for (var i = picked.length - 1; i > 0 && m[row + picked[i]] > m[row + picked[i - 1]]; i--) {
        var t = picked[i];
        picked[i] = picked[i - 1];
        picked[i - 1] = t;
      }
    }
    return picked;
  }

  // ------------------------------------------------------------ URL hash

  function ourHashParams() {
    var raw = location.hash.replace(/^#/, '');
    if (raw.indexOf('=') < 0) return null; // an ordinary heading anchor: not ours
    var params = new URLSearchParams(raw);
    for (var i = 0; i < HASH_KEYS.length; i++) if (params.has(HASH_KEYS[i])) return params;
    return null;
  }

  function intParam(params, name, limit) {
    var raw = params.get(name);
    if (raw === null || !/^\d+$/.test(raw)) return null;
    var v = parseInt(raw, 10);
    return v < limit ? v : null;
  }

  function writeHash(text) {
    if (location.hash.replace(/^#/, '') === text) return;
    try {
      // replaceState does not scroll, add history entries or fire hashchange
      history.replaceState(history.state, '', '#' + text);
    } catch (err) {
      location.hash = text;
    }
  }

  function linkFor(text) {
    return location.href.split('#')[0] + '#' + text;
  }

  // A "copy link" control: clipboard when allowed, otherwise a selected text box.
  function copyControl(getHash) {
    var wrap = el('span', 'rgv-copy-wrap');
    var b = button('rgv-copy', 'Copy link', 'Copy a link to exactly this view');
    var box = el('input', 'rgv-link');
    box.readOnly = true;
    box.hidden = true;
    box.setAttribute('aria-label', 'link to this view');
    var note = el('span', 'rgv-copy-note');
    b.addEventListener('click', function () {
      var url = linkFor(getHash());
      box.value = url;
      box.hidden = false;
      var fallback = function () {
        box.select();
        note.textContent = 'Select the link and copy it';
      };
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(url).then(function () {
          note.textContent = 'Link copied';
        }, fallback);
      } else {
        fallback();
      }
    });
    wrap.appendChild(b);
    wrap.appendChild(box);
    wrap.appendChild(note);
    return wrap;
  }

  function markFirstRender(root, t0) {
    var t1 = performance.now();
    root.setAttribute('data-first-render-ms', (t1 - t0).toFixed(1));
    root.setAttribute('data-first-render-at', t1.toFixed(1));
    try {
      performance.measure('rgv-first-render', { start: t0, end: t1 });
    } catch (err) {
      /* older browsers without measure options: the data attributes still hold the figures */
    }
  }

  // ----------------------------------------------------- head + model view

  function ViewsWidget(root, data, ownsHash) {
    var t0 = performance.now();
    this.root = root;
    this.data = data;
    this.ownsHash = ownsHash;
    this.att = new Attention(data.attention);
    this.n = this.att.n;
    this.groups = pairGroups(data.segments);
    this.isPair = data.segments.indexOf(1) >= 0;
    this.hover = null;
    this.defaults = this.defaultState();
    this.state = this.defaultState();
    this.build();
    if (ownsHash) this.applyHash(false);
    this.render(false);
    markFirstRender(root, t0);
  }

  ViewsWidget.prototype.defaultState = function () {
    var long = this.n > LONG_INPUT;
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

  ViewsWidget.prototype.build = function () {
    var self = this;
    var root = this.root;
    root.classList.add('rgv-ready');

    var bar = el('div', 'rgv-toolbar');
    this.tabs = {};
    var tabs = el('div', 'rgv-tabs');
    tabs.setAttribute('role', 'group');
    [['head', 'Head view'], ['model', 'Model view']].forEach(function (t) {
      var b = button('rgv-tab', t[1]);
      b.setAttribute('data-view', t[0]);
      b.addEventListener('click', function () {
        self.state.view = t[0];
        self.render(true);
      });
      self.tabs[t[0]] = b;
      tabs.appendChild(b);
    });
    bar.appendChild(tabs);

    this.layerSelect = selectOf('rgv-layer', range(this.att.layers).map(function (l) { return [l, 'Layer ' + l]; }));
    this.layerSelect.addEventListener('change', function () {
      self.state.layer = parseInt(self.layerSelect.value, 10);
      self.render(true);
    });
    bar.appendChild(labelled('Layer', this.layerSelect));

    this.filterButtons = {};
    if (this.isPair) {
      var filters = el('div', 'rgv-filter');
      filters.setAttribute('role', 'group');
      filters.setAttribute('aria-label', 'sentence pair filter (attending \u2192 attended)');
      FILTERS.forEach(function (f) {
        var b = button('rgv-filter-btn', FILTER_LABELS[f]);
        b.setAttribute('data-filter', f);
        b.addEventListener('click', function () {
          self.state.filter = f;
          self.render(true);
        });
        self.filterButtons[f] = b;
        filters.appendChild(b);
      });
      bar.appendChild(filters);
    }

    this.topkInput = el('input', 'rgv-topk');
    this.topkInput.type = 'number';
    this.topkInput.min = '1';
    this.topkInput.max = String(this.n);
    this.topkInput.addEventListener('change', function () {
      var v = parseInt(self.topkInput.value, 10);
      self.state.topk = isFinite(v) ? Math.max(1, Math.min(self.n, v)) : self.defaults.topk;
      self.render(true);
    });
    bar.appendChild(labelled('Top-k per token', this.topkInput));

    this.minInput = el('input', 'rgv-min');
    this.minInput.type = 'number';
    this.minInput.min = '0';
    this.minInput.max = '1';
    this.minInput.step = '0.01';
    this.minInput.addEventListener('change', function () {
      var v = parseFloat(self.minInput.value);
      self.state.min = isFinite(v) ? Math.max(0, Math.min(1, v)) : self.defaults.min;
      self.render(true);
    });
    bar.appendChild(labelled('Min weight', this.minInput));
    bar.appendChild(copyControl(function () { return self.hashText(); }));
    root.appendChild(bar);

    var heads = el('div', 'rgv-heads');
    heads.setAttribute('role', 'group');
    heads.setAttribute('aria-label', 'heads');
    this.headButtons = range(this.att.heads).map(function (h) {
      var b = button('rgv-head-toggle', String(h), 'Head ' + h + ' (click: toggle, double-click: only this head)');
      b.setAttribute('data-head', String(h));
      b.style.setProperty('--rgv-head', headColour(h, self.att.heads));
      b.addEventListener('click', function () { self.toggleHead(h); });
      b.addEventListener('dblclick', function () {
        self.state.heads = [h];
        self.render(true);
      });
      heads.appendChild(b);
      return b;
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
    root.appendChild(heads);

    this.headPanel = el('div', 'rgv-panel rgv-head-panel');
    this.modelPanel = el('div', 'rgv-panel rgv-model-panel');
    this.zoom = el('div', 'rgv-zoom');
    this.zoomTitle = el('span', 'rgv-zoom-title');
    var close = button('rgv-zoom-close', 'Close', 'Back to the grid');
    close.addEventListener('click', function () {
      self.state.zoom = false;
      self.render(true);
    });
    var zoomBar = el('div', 'rgv-zoom-bar');
    zoomBar.appendChild(this.zoomTitle);
    zoomBar.appendChild(close);
    this.zoom.appendChild(zoomBar);
    this.modelPanel.appendChild(this.zoom);
    this.grid = null; // built when the model view is first shown
    this.stage = this.buildStage();
    root.appendChild(this.headPanel);
    root.appendChild(this.modelPanel);
    this.status = el('p', 'rgv-status');
    this.status.setAttribute('aria-live', 'polite');
    root.appendChild(this.status);
  };

  ViewsWidget.prototype.toggleHead = function (h) {
    var i = this.state.heads.indexOf(h);
    if (i >= 0) this.state.heads.splice(i, 1);
    else this.state.heads.push(h);
    this.state.heads.sort(function (a, b) { return a - b; });
    this.render(true);
  };

  // The head view: token columns (HTML, so text stays text) around an SVG of lines.
  ViewsWidget.prototype.buildStage = function () {
    var self = this;
    var stage = el('div', 'rgv-stage');
    stage.style.setProperty('--rgv-row', ROW_H + 'px');
    this.left = el('div', 'rgv-col rgv-left');
    this.right = el('div', 'rgv-col rgv-right');
    this.leftRows = [];
    this.rightRows = [];
    var side = function (col, rows, which) {
      self.data.tokens.forEach(function (tok, i) {
        var row = el('div', 'rgv-tok');
        row.setAttribute('data-i', String(i));
        row.setAttribute('data-group', self.groups[i]);
        if (self.data.special[i]) row.classList.add('rgv-special');
        var text = el('span', 'rgv-tok-text', tok);
        text.title = '#' + i + ' ' + tok;
        var nums = el('span', 'rgv-nums');
        if (which === 'q') {
          row.appendChild(nums);
          row.appendChild(text);
        } else {
          row.appendChild(text);
          row.appendChild(nums);
        }
        col.appendChild(row);
        rows.push({ row: row, nums: nums });
      });
      // Hover shows one token's lines; a click (or a tap) pins it and goes into the link.
      col.addEventListener('mouseover', function (ev) {
        var row = ev.target.closest && ev.target.closest('.rgv-tok');
        if (!row) return;
        var i = parseInt(row.getAttribute('data-i'), 10);
        if (self.hover && self.hover.side === which && self.hover.i === i) return;
        self.hover = { side: which, i: i };
        self.drawStage();
      });
      col.addEventListener('mouseleave', function () {
        self.hover = null;
        self.drawStage();
      });
      col.addEventListener('click', function (ev) {
        var row = ev.target.closest && ev.target.closest('.rgv-tok');
        if (!row) return;
        var i = parseInt(row.getAttribute('data-i'), 10);
        var field = which === 'q' ? 'token' : 'key';
        var other = which === 'q' ? 'key' : 'token';
        self.state[field] = self.state[field] === i ? null : i;
        self.state[other] = null;
        self.hover = null;
        self.render(true);
      });
    };
    side(this.left, this.leftRows, 'q');
    side(this.right, this.rightRows, 'k');
    this.svg = svgEl('svg', {
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

  ViewsWidget.prototype.allowFn = function () {
    var f = this.state.filter;
    var g = this.groups;
    if (f === 'all' || !this.isPair) return function () { return true; };
    return function (q, k) { return g[q] === f[0] && g[k] === f[1]; };
  };

  ViewsWidget.prototype.activeToken = function () {
    if (this.hover) return this.hover;
    if (this.state.token !== null) return { side: 'q', i: this.state.token };
    if (this.state.key !== null) return { side: 'k', i: this.state.key };
    return null;
  };

  ViewsWidget.prototype.clearNumbers = function () {
    (this.touchedNums || []).forEach(function (nums) { nums.textContent = ''; });
    this.touchedNums = [];
    (this.activeRows || []).forEach(function (row) { row.classList.remove('rgv-active'); });
    this.activeRows = [];
  };

  ViewsWidget.prototype.showNumber = function (nums, h, q, k, w) {
    var span = el('span', 'rgv-num', w.toFixed(4));
    span.setAttribute('data-head', String(h));
    span.setAttribute('data-q', String(q));
    span.setAttribute('data-k', String(k));
    span.setAttribute('data-w', String(w));
    span.style.color = headColour(h, this.att.heads);
    span.title = 'head ' + h + ': ' + w.toFixed(6);
    if (!nums.firstChild) this.touchedNums.push(nums);
    nums.appendChild(span);
  };

  // Draws the lines of the selected heads; with an active token only its lines, plus their weights as numbers.
  ViewsWidget.prototype.drawStage = function () {
    var st = this.state;
    var n = this.n;
    var allow = this.allowFn();
    var active = this.activeToken();
    var frag = document.createDocumentFragment();
    var count = 0;
    this.clearNumbers();
    if (active) {
      var rows = active.side === 'q' ? this.leftRows : this.rightRows;
      rows[active.i].row.classList.add('rgv-active');
      this.activeRows.push(rows[active.i].row);
    }
    for (var hi = 0; hi < st.heads.length; hi++) {
      var h = st.heads[hi];
      var m = this.att.matrix(st.layer, h);
      var colour = headColour(h, this.att.heads);
      var line = function (q, k, w) {
        frag.appendChild(svgEl('line', {
          class: 'rgv-line',
          x1: 0,
          y1: q * ROW_H + ROW_H / 2,
          x2: LINES_W,
          y2: k * ROW_H + ROW_H / 2,
          stroke: colour,
          'stroke-opacity': w.toFixed(4),
          'data-head': h,
          'data-q': q,
          'data-k': k,
          'data-w': w,
        }));
        count++;
      };
      if (active && active.side === 'q') {
        for (var k = 0; k < n; k++) {
          if (!allow(active.i, k)) continue;
          line(active.i, k, m[active.i * n + k]);
          this.showNumber(this.rightRows[k].nums, h, active.i, k, m[active.i * n + k]);
        }
      } else if (active) {
        for (var q = 0; q < n; q++) {
          if (!allow(q, active.i)) continue;
          line(q, active.i, m[q * n + active.i]);
          this.showNumber(this.leftRows[q].nums, h, q, active.i, m[q * n + active.i]);
        }
      } else {
        for (var q2 = 0; q2 < n; q2++) {
          var keys = st.topk >= n && st.min <= 0 ? null : pickKeys(m, n, q2, st.topk, st.min, allow);
          if (keys === null) {
            for (var k2 = 0; k2 < n; k2++) if (allow(q2, k2)) line(q2, k2, m[q2 * n + k2]);
          } else {
            for (var j = 0; j < keys.length; j++) line(q2, keys[j], m[q2 * n + keys[j]]);
          }
        }
      }
    }
    while (this.svg.firstChild) this.svg.removeChild(this.svg.firstChild);
    this.svg.appendChild(frag);
    this.svg.setAttribute('data-lines', String(count));
    this.status.textContent = this.describe(active, count);
  };

  ViewsWidget.prototype.describe = function (active, count) {
    var st = this.state;
    var parts = ['Layer ' + st.layer, st.heads.length + ' of ' + this.att.heads + ' heads', count + ' lines'];
    if (active) {
      var tok = this.data.tokens[active.i];
      parts.push((active.side === 'q' ? 'attention from ' : 'attention to ') + '#' + active.i + ' ' + tok);
    } else {
      parts.push(st.topk < this.n || st.min > 0 ? 'top ' + st.topk + ' per token, weight \u2265 ' + st.min : 'all weights');
      parts.push('hover or tap a token for its weights');
    }
    return parts.join(' \u00b7 ');
  };

  // The model view: layers x heads thumbnails on canvases, drawn only when scrolled into view.
  ViewsWidget.prototype.buildGrid = function () {
    var self = this;
    var grid = el('div', 'rgv-grid');
    grid.style.setProperty('--rgv-cols', String(this.att.heads));
    grid.appendChild(el('span', 'rgv-grid-corner'));
    range(this.att.heads).forEach(function (h) { grid.appendChild(el('span', 'rgv-grid-head', 'H' + h)); });
    this.thumbs = [];
    range(this.att.layers).forEach(function (l) {
      grid.appendChild(el('span', 'rgv-grid-layer', 'L' + l));
      range(self.att.heads).forEach(function (h) {
        var c = el('canvas', 'rgv-thumb');
        c.width = THUMB_W;
        c.height = THUMB_H;
        c.setAttribute('data-layer', String(l));
        c.setAttribute('data-head', String(h));
        c.setAttribute('role', 'button');
        c.setAttribute('tabindex', '0');
        c.setAttribute('aria-label', 'layer ' + l + ' head ' + h + ': enlarge');
        c.title = 'Layer ' + l + ', head ' + h;
        var open = function () {
          self.state.layer = l;
          self.state.heads = [h];
          self.state.zoom = true;
          self.render(true);
        };
        c.addEventListener('click', open);
        c.addEventListener('keydown', function (ev) {
          if (ev.key === 'Enter' || ev.key === ' ') {
            ev.preventDefault();
            open();
          }
        });
        grid.appendChild(c);
        self.thumbs.push(c);
      });
    });
    if ('IntersectionObserver' in window) {
      this.observer = new IntersectionObserver(function (entries) {
        entries.forEach(function (e) { if (e.isIntersecting) self.drawThumb(e.target); });
      }, { rootMargin: '200px' });
    }
    this.modelPanel.appendChild(grid);
    this.grid = grid;
  };

  ViewsWidget.prototype.thumbKey = function () {
    return this.state.filter + '|' + this.state.topk + '|' + this.state.min;
  };

  ViewsWidget.prototype.drawThumb = function (c) {
    var key = this.thumbKey();
    if (c.getAttribute('data-drawn') === key) return;
    var l = parseInt(c.getAttribute('data-layer'), 10);
    var h = parseInt(c.getAttribute('data-head'), 10);
    var n = this.n;
    var m = this.att.matrix(l, h);
    var allow = this.allowFn();
    var ctx = c.getContext('2d');
    var step = THUMB_H / n;
    var topk = Math.min(this.state.topk, n > LONG_INPUT ? 3 : n);
    var min = Math.max(this.state.min, THUMB_MIN);
    ctx.clearRect(0, 0, THUMB_W, THUMB_H);
    ctx.strokeStyle = headColour(h, this.att.heads);
    ctx.lineWidth = 1;
    for (var q = 0; q < n; q++) {
      var keys = pickKeys(m, n, q, topk, min, allow);
      for (var j = 0; j < keys.length; j++) {
        ctx.globalAlpha = Math.min(1, m[q * n + keys[j]]);
        ctx.beginPath();
        ctx.moveTo(4, (q + 0.5) * step);
        ctx.lineTo(THUMB_W - 4, (keys[j] + 0.5) * step);
        ctx.stroke();
      }
    }
    ctx.globalAlpha = 1;
    c.setAttribute('data-drawn', key);
  };

  ViewsWidget.prototype.drawGrid = function () {
    var self = this;
    if (!this.grid) this.buildGrid();
    var key = this.thumbKey();
    this.thumbs.forEach(function (c) {
      var selected = self.state.zoom && self.state.layer === +c.getAttribute('data-layer') &&
        self.state.heads.indexOf(+c.getAttribute('data-head')) >= 0;
      c.classList.toggle('rgv-selected', selected);
      if (c.getAttribute('data-drawn') === key) return;
      if (self.observer) {
        self.observer.unobserve(c); // observing again reports visibility afresh
        self.observer.observe(c);
      } else {
        self.drawThumb(c);
      }
    });
  };

  ViewsWidget.prototype.syncControls = function () {
    var st = this.state;
    var self = this;
    Object.keys(this.tabs).forEach(function (v) { self.tabs[v].setAttribute('aria-pressed', String(st.view === v)); });
    this.layerSelect.value = String(st.layer);
    this.headButtons.forEach(function (b, h) { b.setAttribute('aria-pressed', String(st.heads.indexOf(h) >= 0)); });
    Object.keys(this.filterButtons).forEach(function (f) {
      self.filterButtons[f].setAttribute('aria-pressed', String(st.filter === f));
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
      this.zoomTitle.textContent = 'Layer ' + st.layer + ', head' + (st.heads.length === 1 ? ' ' : 's ') + st.heads.join(', ');
    }
    if (st.view === 'head' || zoomed) this.drawStage();
    else this.status.textContent = 'Click a head to enlarge it';
    if (st.view === 'model') this.drawGrid();
    var text = this.hashText();
    this.root.setAttribute('data-rgv-state', text);
    if (fromUser && this.ownsHash) writeHash(text);
  };

  ViewsWidget.prototype.hashText = function () {
    var st = this.state;
    var d = this.defaults;
    var p = new URLSearchParams();
    p.set('view', st.view);
    if (st.view === 'head' || st.zoom) {
      p.set('layer', String(st.layer));
      p.set('head', st.heads.join(','));
    }
    if (st.token !== null) p.set('token', String(st.token));
    if (st.key !== null) p.set('key', String(st.key));
    if (st.filter !== 'all') p.set('filter', st.filter);
    if (st.topk !== d.topk) p.set('topk', String(st.topk));
    if (st.min !== d.min) p.set('min', String(st.min));
    return p.toString().replace(/%2C/g, ',');
  };

  // Restores the state a link describes; keys it does not give keep their defaults.
  ViewsWidget.prototype.applyHash = function (rerender) {
    var p = ourHashParams();
    if (!p) return;
    var st = this.defaultState();
    var view = p.get('view');
    if (view === 'head' || view === 'model') st.view = view;
    var layer = intParam(p, 'layer', this.att.layers);
    if (layer !== null) st.layer = layer;
    var headText = p.get('head') !== null ? p.get('head') : p.get('heads');
    if (headText !== null) {
      var H = this.att.heads;
      st.heads = headText.split(',').filter(function (s) { return /^\d+$/.test(s) && +s < H; })
        .map(Number).filter(function (h, i, all) { return all.indexOf(h) === i; }).sort(function (a, b) { return a - b; });
    }
    st.zoom = st.view === 'model' && layer !== null && headText !== null;
    st.token = intParam(p, 'token', this.n);
    st.key = st.token === null ? intParam(p, 'key', this.n) : null;
    var filter = p.get('filter');
    if (filter && FILTERS.indexOf(filter) >= 0 && this.isPair) st.filter = filter;
    var topk = intParam(p, 'topk', this.n + 1);
    if (topk) st.topk = topk;
    var min = parseFloat(p.get('min'));
    if (isFinite(min) && min >= 0 && min <= 1) st.min = min;
    this.state = st;
    this.hover = null;
    if (rerender) this.render(false);
  };

  // ---------------------------------------------------------- query/key view

  function vectorColour(v, maxAbs) {
    var t = maxAbs > 0 ? Math.min(1, Math.abs(v) / maxAbs) : 0;
    return v >= 0 ? 'rgba(214, 39, 40, ' + t.toFixed(3) + ')' : 'rgba(31, 119, 180, ' + t.toFixed(3) + ')';
  }

  function QKWidget(root, data, ownsHash) {
    var t0 = performance.now();
    this.root = root;
    this.data = data;
    this.ownsHash = ownsHash;
    this.att = new Attention(data.attention);
    this.n = this.att.n;
    this.dim = data.head_dim;
    this.cache = new Map();
    var firstWord = data.special.indexOf(0);
    this.state = { layer: 0, head: 0, token: firstWord >= 0 ? firstWord : 0 };
    this.build();
    if (ownsHash) this.applyHash(false);
    this.render(false);
    markFirstRender(root, t0);
  }

  QKWidget.prototype.vectors = function (layer, head) {
    var id = layer * this.att.heads + head;
    if (!this.cache.has(id)) {
      this.cache.set(id, { q: base64Float32(this.data.queries[id]), k: base64Float32(this.data.keys[id]) });
    }
    return this.cache.get(id);
  };

  QKWidget.prototype.build = function () {
    var self = this;
    var root = this.root;
    root.classList.add('rgv-ready', 'rgv-qk');
    var bar = el('div', 'rgv-toolbar');
    this.layerSelect = selectOf('rgv-layer', range(this.att.layers).map(function (l) { return [l, 'Layer ' + l]; }));
    this.headSelect = selectOf('rgv-head', range(this.att.heads).map(function (h) { return [h, 'Head ' + h]; }));
    this.layerSelect.addEventListener('change', function () {
      self.state.layer = parseInt(self.layerSelect.value, 10);
      self.render(true);
    });
    this.headSelect.addEventListener('change', function () {
      self.state.head = parseInt(self.headSelect.value, 10);
      self.render(true);
    });
    bar.appendChild(labelled('Layer', this.layerSelect));
    bar.appendChild(labelled('Head', this.headSelect));
    bar.appendChild(copyControl(function () { return self.hashText(); }));
    root.appendChild(bar);

    var strip = el('div', 'rgv-qk-tokens');
    strip.setAttribute('role', 'group');
    strip.setAttribute('aria-label', 'query token');
    this.tokenButtons = this.data.tokens.map(function (tok, i) {
      var b = button('rgv-qk-token', tok, 'query token #' + i);
      b.setAttribute('data-i', String(i));
      b.addEventListener('click', function () {
        self.state.token = i;
        self.render(true);
      });
      strip.appendChild(b);
      return b;
    });
    root.appendChild(strip);

    this.queryLine = el('div', 'rgv-qk-query');
    root.appendChild(this.queryLine);
    var table = el('table', 'rgv-qk-table');
    var head = el('tr');
    ['key', 'k (key vector)', 'q \u00d7 k (elementwise)', 'q \u00b7 k', 'q \u00b7 k \u00d7 scale', 'softmax', 'model']
      .forEach(function (t) { head.appendChild(el('th', null, t)); });
    var thead = el('thead');
    thead.appendChild(head);
    table.appendChild(thead);
    this.tbody = el('tbody');
    table.appendChild(this.tbody);
    var wrap = el('div', 'rgv-qk-wrap');
    wrap.appendChild(table);
    root.appendChild(wrap);
    this.note = el('p', 'rgv-status');
    root.appendChild(this.note);
  };

  QKWidget.prototype.strip = function (values, offset, maxAbs) {
    var s = el('span', 'rgv-vec');
    for (var d = 0; d < this.dim; d++) {
      var v = values[offset + d];
      var cell = el('span', 'rgv-cell');
      cell.style.backgroundColor = vectorColour(v, maxAbs);
      cell.title = 'dim ' + d + ': ' + v.toFixed(4);
      s.appendChild(cell);
    }
    return s;
  };

  QKWidget.prototype.render = function (fromUser) {
    var st = this.state;
    var n = this.n;
    var D = this.dim;
    var vec = this.vectors(st.layer, st.head);
    var q0 = st.token * D;
    var prods = new Float64Array(n * D);
    var dots = new Float64Array(n);
    var maxAbs = 0;
    var maxProd = 0;
    for (var i = 0; i < vec.q.length; i++) maxAbs = Math.max(maxAbs, Math.abs(vec.q[i]), Math.abs(vec.k[i]));
    for (var k = 0; k < n; k++) {
      for (var d = 0; d < D; d++) {
        var p = vec.q[q0 + d] * vec.k[k * D + d];
        prods[k * D + d] = p;
        dots[k] += p;
        maxProd = Math.max(maxProd, Math.abs(p));
      }
    }
    // softmax of the scaled dot products, shifted by the maximum for stability
    var scaling = this.data.scaling;
    var top = -Infinity;
    for (k = 0; k < n; k++) top = Math.max(top, dots[k] * scaling);
    var exps = new Float64Array(n);
    var total = 0;
    for (k = 0; k < n; k++) {
      exps[k] = Math.exp(dots[k] * scaling - top);
      total += exps[k];
    }
    var model = this.att.matrix(st.layer, st.head);

    this.layerSelect.value = String(st.layer);
    this.headSelect.value = String(st.head);
    this.tokenButtons.forEach(function (b, i) { b.setAttribute('aria-pressed', String(i === st.token)); });
    this.queryLine.textContent = '';
    this.queryLine.appendChild(el('span', 'rgv-qk-label', 'q of #' + st.token + ' '));
    this.queryLine.appendChild(el('span', 'rgv-tok-text', this.data.tokens[st.token]));
    this.queryLine.appendChild(this.strip(vec.q, q0, maxAbs));

    var frag = document.createDocumentFragment();
    var worst = 0;
    for (k = 0; k < n; k++) {
      var soft = exps[k] / total;
      var w = model[st.token * n + k];
      worst = Math.max(worst, Math.abs(soft - w));
      var tr = el('tr', 'rgv-qk-row');
      tr.setAttribute('data-k', String(k));
      tr.setAttribute('data-dot', String(dots[k]));
      tr.setAttribute('data-score', String(dots[k] * scaling));
      tr.setAttribute('data-softmax', String(soft));
      tr.setAttribute('data-model', String(w));
      var tokCell = el('td', 'rgv-tok-text', this.data.tokens[k]);
      tokCell.title = '#' + k;
      tr.appendChild(tokCell);
      var kc = el('td');
      kc.appendChild(this.strip(vec.k, k * D, maxAbs));
      tr.appendChild(kc);
      var pc = el('td');
      pc.appendChild(this.strip(prods, k * D, maxProd));
      tr.appendChild(pc);
      tr.appendChild(el('td', 'rgv-number', dots[k].toFixed(3)));
      tr.appendChild(el('td', 'rgv-number', (dots[k] * scaling).toFixed(3)));
      var sc = el('td', 'rgv-number rgv-soft');
      var bar = el('span', 'rgv-bar');
      bar.style.width = (soft * 100).toFixed(1) + '%';
      sc.appendChild(bar);
      sc.appendChild(el('span', null, soft.toFixed(4)));
      tr.appendChild(sc);
      tr.appendChild(el('td', 'rgv-number', w.toFixed(4)));
      frag.appendChild(tr);
    }
    this.tbody.textContent = '';
    this.tbody.appendChild(frag);
    this.note.textContent = 'Layer ' + st.layer + ', head ' + st.head + ', query #' + st.token +
      ': softmax(q \u00b7 k \u00d7 ' + scaling.toPrecision(4) + ') over ' + n + ' keys; largest difference from the model\u2019s stored weights ' +
      worst.toExponential(1) + (worst > 0.01 ? ' (this model adds terms beyond q \u00b7 k, e.g. relative positions)' : ' (8-bit page encoding)');
    var text = this.hashText();
    this.root.setAttribute('data-rgv-state', text);
    if (fromUser && this.ownsHash) writeHash(text);
  };

  QKWidget.prototype.hashText = function () {
    return 'view=qk&layer=' + this.state.layer + '&head=' + this.state.head + '&token=' + this.state.token;
  };

  QKWidget.prototype.applyHash = function (rerender) {
    var p = ourHashParams();
    if (!p) return;
    var layer = intParam(p, 'layer', this.att.layers);
    var head = intParam(p, 'head', this.att.heads);
    var token = intParam(p, 'token', this.n);
    if (layer !== null) this.state.layer = layer;
    if (head !== null) this.state.head = head;
    if (token !== null) this.state.token = token;
    if (rerender) this.render(false);
  };

  // ------------------------------------------------------------------ start

  var owner = null;

  function readPayload(root) {
    var script = root.querySelector('script.rgv-data');
    if (!script) throw new Error('no <script class="rgv-data"> inside the view container');
    return JSON.parse(script.textContent);
  }

  function init() {
    var roots = document.querySelectorAll('.rgv[data-rgv]');
    for (var i = 0; i < roots.length; i++) {
      var root = roots[i];
      if (root.getAttribute('data-rgv-init')) continue; // Material's document$ may call us again
      root.setAttribute('data-rgv-init', '1');
      var first = owner === null;
      try {
        var data = readPayload(root);
        var widget = root.getAttribute('data-rgv') === 'qk' ? new QKWidget(root, data, first) : new ViewsWidget(root, data, first);
        if (first) owner = widget;
      } catch (err) {
        root.appendChild(el('p', 'rgv-error', 'The attention view could not be drawn: ' + err.message));
        throw err; // surface it in the console as well: a broken page should not pass quietly
      }
    }
  }

  window.addEventListener('hashchange', function () {
    if (owner) owner.applyHash(true);
  });

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
  if (window.document$ && typeof window.document$.subscribe === 'function') window.document$.subscribe(init);
})();
