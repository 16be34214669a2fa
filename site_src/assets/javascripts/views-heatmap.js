/*
 * reportgen attention views: heatmaps for long inputs (issue 46). Past views.HEATMAP_FROM tokens (views-core.js) the lines from every
 * query to its keys can no longer be told apart (a 1,024-token head view was 23,457 px tall, and a model view
 * thumbnail squashed 1,000 rows into its top edge), so each head is also drawn as a heatmap: queries down, keys
 * across, each pixel the LARGEST weight of the block of queries and keys it covers (max-pooling), so that a sharp
 * head (previous-token, a sink, an induction diagonal) stays visible when a thousand rows fall in 80 pixels. A
 * pixel's opacity is the square root of that weight (0.01 shows at 10%, 0.25 at half), in the head's colour.
 *
 * The model view's thumbnails are such heatmaps of the whole head (views-model.js drawThumb). The head view puts
 * one over its token columns (buildHeat): the first selected head, over a window of queries and keys that zooms
 * and pans (buttons, or the keyboard on the heatmap: + and - zoom, the arrows pan, 0 shows the whole head) and
 * goes into the link (win=Q0-Q1,K0-K1: views-core.js parseWindow). Pointing at it says which query and key are
 * under the pointer and the largest weight of that pixel's block; a click, or Enter, pins that query, so the
 * lines and the weights table below show its row. Token labels run down its left (queries) and across its top
 * (keys): every token's where each has room, else every step-th (axisLabels). Test hook: each drawn canvas keeps
 * what it drew (rgvPooled: views-heatmap.js maxPool's result and the window).
 */
(function (views) {
  'use strict';

  var HEAT_PX = 480; // CSS px: the head view heatmap's side, narrowed to the width there is
  var MIN_SPAN = 8; // tokens: the smallest window a zoom goes to
  var PAN = 0.25; // of the window's span: how far an arrow key moves it
  var LABEL_PX = 14; // CSS px: the least room a token label takes along its axis (a line of 0.8rem text)

  // `count` + 1 bin edges splitting [start, start + span) as evenly as whole tokens allow.
  function edges(start, span, count) {
    var out = new Int32Array(count + 1);
    for (var i = 0; i <= count; i++) out[i] = start + Math.floor(i * span / count);
    return out;
  }

  /*
   * The max-pool of one head's n x m `matrix` (row-major, m keys a row) over the window `win` ({q0, q1, k0, k1},
   * ends exclusive) into at most rows x cols cells (fewer where the window has fewer tokens: a cell is never
   * smaller than a token). `allow(q, k)`, if given, leaves out the pairs the view does not draw (a pair filter,
   * a causal group's upper triangle). Returns {rows, cols, values: Float32Array [rows * cols], qEdges, kEdges}.
   */
  function maxPool(matrix, m, win, rows, cols, allow) {
    var r0 = Math.max(1, Math.min(rows, win.q1 - win.q0));
    var c0 = Math.max(1, Math.min(cols, win.k1 - win.k0));
    var qEdges = edges(win.q0, win.q1 - win.q0, r0);
    var kEdges = edges(win.k0, win.k1 - win.k0, c0);
    var values = new Float32Array(r0 * c0);
    for (var r = 0; r < r0; r++) {
      for (var q = qEdges[r]; q < qEdges[r + 1]; q++) {
        var base = q * m;
        for (var c = 0; c < c0; c++) {
          var best = values[r * c0 + c];
          for (var k = kEdges[c]; k < kEdges[c + 1]; k++) {
            var w = matrix[base + k];
            if (w > best && (!allow || allow(q, k))) best = w;
          }
          values[r * c0 + c] = best;
        }
      }
    }
    return { rows: r0, cols: c0, values: values, qEdges: qEdges, kEdges: kEdges };
  }

  // A pixel's opacity (0-255) for a weight: its square root, so that small weights still show.
  function heatAlpha(weight) {
    return Math.round(255 * Math.sqrt(Math.min(1, Math.max(0, weight))));
  }

  // '#rrggbb' as [r, g, b].
  function rgbOf(colour) {
    return [1, 3, 5].map(function (at) { return parseInt(colour.slice(at, at + 2), 16); });
  }

  // Draws `pooled` (maxPool's result) on `canvas`, stretched over its width x height CSS px, in `colour` ('#rrggbb').
  function paint(canvas, pooled, colour, width, height) {
    var ratio = window.devicePixelRatio || 1;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    var cells = document.createElement('canvas');
    cells.width = pooled.cols;
    cells.height = pooled.rows;
    var image = cells.getContext('2d').createImageData(pooled.cols, pooled.rows);
    var rgb = rgbOf(colour);
    for (var i = 0; i < pooled.values.length; i++) {
      image.data.set(rgb, 4 * i);
      image.data[4 * i + 3] = heatAlpha(pooled.values[i]);
    }
    cells.getContext('2d').putImageData(image, 0, 0);
    var ctx = canvas.getContext('2d');
    ctx.imageSmoothingEnabled = false; // a cell is a block of pixels, not a blur
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    ctx.drawImage(cells, 0, 0, canvas.width, canvas.height);
    canvas.rgvPooled = pooled;
  }

  // The window `win` zoomed by `factor` (0.5: half the span) around query cq and key ck, within n x m tokens.
  function zoomWindow(win, n, m, factor, cq, ck) {
    function axis(lo, hi, count, centre) {
      var span = Math.min(count, Math.max(Math.min(MIN_SPAN, count), Math.round((hi - lo) * factor)));
      var start = Math.round(centre - span / 2);
      start = Math.max(0, Math.min(count - span, start));
      return [start, start + span];
    }
    var q = axis(win.q0, win.q1, n, cq);
    var k = axis(win.k0, win.k1, m, ck);
    return { q0: q[0], q1: q[1], k0: k[0], k1: k[1] };
  }

  // The window `win` moved by dq and dk spans (PAN: a quarter), kept within n x m tokens.
  function panWindow(win, n, m, dq, dk) {
    function axis(lo, hi, count, step) {
      var span = hi - lo;
      var start = Math.max(0, Math.min(count - span, lo + Math.round(step * span)));
      return [start, start + span];
    }
    var q = axis(win.q0, win.q1, n, dq);
    var k = axis(win.k0, win.k1, m, dk);
    return { q0: q[0], q1: q[1], k0: k[0], k1: k[1] };
  }

  /*
   * The token labels that fit along an axis of `px` CSS px showing tokens [start, end): every token where each has
   * LABEL_PX or more, else every step-th (the smallest step that leaves LABEL_PX a label), first at a multiple of
   * the step. Each is {index, at}: `at` the px of the token's centre from the axis's start.
   */
  function axisLabels(start, end, px) {
    var span = end - start;
    if (span <= 0 || px <= 0) return [];
    var step = Math.max(1, Math.ceil(span * LABEL_PX / px));
    var out = [];
    for (var i = Math.ceil(start / step) * step; i < end; i += step) {
      out.push({ index: i, at: (i - start + 0.5) * px / span });
    }
    return out;
  }

  var exported = { maxPool: maxPool, heatAlpha: heatAlpha, zoomWindow: zoomWindow, panWindow: panWindow,
    paintHeatmap: paint, axisLabels: axisLabels, LABEL_PX: LABEL_PX };
  Object.keys(exported).forEach(function (name) { views[name] = exported[name]; });
  if (!views.ViewsWidget) return; // Node's tests: the pure functions only

  var el = views.el;
  var proto = views.ViewsWidget.prototype;
  var KEYS = { ArrowUp: [-PAN, 0], ArrowDown: [PAN, 0], ArrowLeft: [0, -PAN], ArrowRight: [0, PAN] };

  // Lets go of the (layer, head)'s inflated and decoded data (a long input's thumbnail, once drawn: loadThumb below):
  // ensure() inflates it again from the deflated chunk, which stays.
  views.Attention.prototype.release = function (layer, head) {
    var id = layer * this.heads + head;
    if (this.compressed) this.inflated.delete(id);
    this.cache.delete(id);
    this.headTotals.delete(id);
  };
  views.MatrixSource.prototype.release = function () {};
  views.NormContributions.prototype.release = function (layer, head) {
    this.cache.delete(layer * this.heads + head);
    this.att.release(layer, head);
  };

  /*
   * A long input's thumbnails load their heads one at a time (thumbQueue), each drawn as soon as it is in and then
   * let go (source().release) unless the head view shows it: inflated, a 4,096-token head is 16.7 MB of codes, and
   * all 64 of a Llama-shaped model's at once held 1.07 GB in the page. Test hooks on the grid's element: how many
   * thumbnails wait (data-rgv-thumbs-pending, gone once all have been drawn) and how many heads the weights keep
   * inflated after the last one (data-rgv-heads-kept).
   */
  proto.loadThumb = function (canvas) {
    this.thumbQueue = this.thumbQueue || [];
    if (this.thumbQueue.indexOf(canvas) < 0) this.thumbQueue.push(canvas);
    this.grid.setAttribute('data-rgv-thumbs-pending', String(this.thumbQueue.length));
    if (!this.thumbLoading) this.nextThumb();
  };

  proto.nextThumb = function () {
    var self = this;
    var canvas = this.thumbQueue && this.thumbQueue.shift();
    this.thumbLoading = Boolean(canvas);
    if (!canvas || !this.grid) {
      if (this.grid) this.grid.removeAttribute('data-rgv-thumbs-pending');
      this.thumbLoading = false;
      return;
    }
    this.grid.setAttribute('data-rgv-thumbs-pending', String(this.thumbQueue.length + 1));
    var layer = +canvas.getAttribute('data-layer');
    var h = +canvas.getAttribute('data-head');
    var source = this.source();
    var drawn = function (error) {
      if (!error && source === self.source() && source.isLoaded(layer, h)) {
        self.drawThumb(canvas);
        var st = self.state;
        var enlarged = st.zoom && st.layer === layer && st.heads.indexOf(h) >= 0;
        if (st.view === 'model' && !enlarged) source.release(layer, h);
        if (self.grid) self.grid.setAttribute('data-rgv-heads-kept', String(self.att.inflated.size));
      }
      self.nextThumb();
    };
    if (source.ensure([[layer, h]], drawn) === null) drawn(null);
  };

  // The head view's heatmap: a bar (zoom in, zoom out, whole head, where the window is), the canvas, a readout.
  proto.buildHeat = function () {
    var self = this;
    var box = el('div', 'rgv-heat');
    var bar = el('div', 'rgv-heat-bar');
    var zoom = function (factor) { return function () { self.zoomHeat(factor); }; };
    [['Zoom in', 'Half the queries and keys, around the pinned token or the centre (+)', zoom(0.5)],
      ['Zoom out', 'Twice the queries and keys (\u2212)', zoom(2)],
      ['Whole head', 'Every query and key (0)', function () { self.setWindow(null); }]].forEach(function (spec) {
      var control = views.button('rgv-heat-button', spec[0], spec[1]);
      control.addEventListener('click', spec[2]);
      bar.appendChild(control);
    });
    this.heatWhere = bar.appendChild(el('span', 'rgv-heat-where'));
    var plot = el('div', 'rgv-heat-plot');
    this.heatKeys = plot.appendChild(el('div', 'rgv-heat-keys'));
    this.heatQueries = plot.appendChild(el('div', 'rgv-heat-queries'));
    this.heatCanvas = plot.appendChild(el('canvas', 'rgv-heat-map'));
    [this.heatKeys, this.heatQueries].forEach(function (axis) { axis.setAttribute('aria-hidden', 'true'); });
    this.heatCanvas.tabIndex = 0;
    this.heatCanvas.setAttribute('role', 'img');
    this.heatReadout = el('p', 'rgv-heat-readout', 'Point at the heatmap to read a weight; click to pin a query.');
    this.heatReadout.setAttribute('aria-live', 'polite');
    this.listenToHeat(this.heatCanvas);
    box.appendChild(bar);
    box.appendChild(plot);
    box.appendChild(this.heatReadout);
    this.heat = box;
    return box;
  };

  // What maxPool leaves out: the pairs the views do not draw (a pair filter, a causal group's upper triangle), or
  // null where they draw every pair (no call per weight).
  proto.poolAllow = function () {
    return this.causal || (this.isPair && this.state.filter !== 'all') ? this.allowFn() : null;
  };

  proto.heatWindow = function () {
    return this.state.win || { q0: 0, q1: this.n, k0: 0, k1: this.m };
  };

  // Sets the window (null: the whole head), drawn and put in the link.
  proto.setWindow = function (win) {
    var whole = !win || (win.q0 === 0 && win.q1 === this.n && win.k0 === 0 && win.k1 === this.m);
    this.state.win = whole ? null : win;
    this.render(true);
  };

  proto.zoomHeat = function (factor) {
    var win = this.heatWindow();
    var cq = this.state.token !== null ? this.state.token + 0.5 : (win.q0 + win.q1) / 2;
    var ck = this.state.key !== null ? this.state.key + 0.5 : (win.k0 + win.k1) / 2;
    this.setWindow(zoomWindow(win, this.n, this.m, factor, cq, ck));
  };

  // The (query, key) under a point of the canvas (client coordinates).
  proto.heatCell = function (x, y) {
    var box = this.heatCanvas.getBoundingClientRect();
    var win = this.heatWindow();
    var fq = Math.min(0.999999, Math.max(0, (y - box.top) / box.height));
    var fk = Math.min(0.999999, Math.max(0, (x - box.left) / box.width));
    return { q: win.q0 + Math.floor(fq * (win.q1 - win.q0)), k: win.k0 + Math.floor(fk * (win.k1 - win.k0)) };
  };

  // What a point of the heatmap shows: its query and key, and the largest weight of its pixel's block.
  proto.heatText = function (cell) {
    var pooled = this.heatCanvas.rgvPooled;
    var r = 0;
    var c = 0;
    while (r + 1 < pooled.rows && pooled.qEdges[r + 1] <= cell.q) r++;
    while (c + 1 < pooled.cols && pooled.kEdges[c + 1] <= cell.k) c++;
    var rows = pooled.qEdges[r + 1] - pooled.qEdges[r];
    var cols = pooled.kEdges[c + 1] - pooled.kEdges[c];
    var what = rows * cols > 1 ? 'largest weight of queries ' + pooled.qEdges[r] + '\u2013' +
      (pooled.qEdges[r + 1] - 1) + ' \u00d7 keys ' + pooled.kEdges[c] + '\u2013' + (pooled.kEdges[c + 1] - 1) : 'weight';
    return 'Query ' + cell.q + ' \u201c' + this.queryTokens[cell.q] + '\u201d \u2192 key ' + cell.k + ' \u201c' +
      this.keyTokens[cell.k] + '\u201d: ' + what + ' ' + pooled.values[r * pooled.cols + c].toFixed(3);
  };

  proto.listenToHeat = function (canvas) {
    var self = this;
    canvas.addEventListener('pointermove', function (event) {
      if (canvas.rgvPooled) self.heatReadout.textContent = self.heatText(self.heatCell(event.clientX, event.clientY));
    });
    canvas.addEventListener('click', function (event) {
      var cell = self.heatCell(event.clientX, event.clientY);
      if (self.state.token !== cell.q) self.pin('q', cell.q);
    });
    canvas.addEventListener('keydown', function (event) {
      var win = self.heatWindow();
      if (KEYS[event.key]) self.setWindow(panWindow(win, self.n, self.m, KEYS[event.key][0], KEYS[event.key][1]));
      else if (event.key === '+' || event.key === '=') self.zoomHeat(0.5);
      else if (event.key === '-') self.zoomHeat(2);
      else if (event.key === '0') self.setWindow(null);
      else if (event.key === 'Enter') self.pin('q', Math.floor((win.q0 + win.q1) / 2));
      else return;
      event.preventDefault();
    });
  };

  // The token labels of one axis of the heatmap (axisLabels), each "index token", centred on its token's row or
  // column (`side`: 'top' for the queries down the left, 'left' for the keys across the top). The labels repeat
  // what the readout says of any token (they are hidden from screen readers, which the readout serves).
  proto.labelHeat = function (axis, tokens, start, end, px, side) {
    axis.textContent = '';
    axisLabels(start, end, px).forEach(function (label) {
      var tag = axis.appendChild(el('span', 'rgv-heat-label', label.index + ' ' + tokens[label.index]));
      tag.setAttribute('data-index', label.index);
      tag.style[side] = label.at + 'px';
    });
    axis.style[side === 'top' ? 'height' : 'width'] = px + 2 + 'px';
  };

  // Draws the first selected head over the window (drawStage calls it).
  proto.drawHeat = function () {
    var st = this.state;
    var head = st.heads[0];
    this.heat.hidden = head === undefined;
    if (head === undefined) return;
    var win = this.heatWindow();
    var room = this.headPanel.clientWidth || HEAT_PX; // the panel scrolls sideways; the heatmap fits its width
    var side = Math.max(120, Math.min(HEAT_PX, room - 2 - this.heatQueries.offsetWidth)); // 2: its border
    var ratio = window.devicePixelRatio || 1;
    var pooled = maxPool(this.source().matrix(st.layer, head), this.m, win, Math.round(side * ratio),
      Math.round(side * ratio), this.poolAllow());
    this.heatCanvas.style.width = this.heatCanvas.style.height = side + 'px';
    paint(this.heatCanvas, pooled, views.headColour(head, this.att.heads), side, side);
    this.heatCanvas.setAttribute('data-win', views.windowText(win));
    this.labelHeat(this.heatQueries, this.queryTokens, win.q0, win.q1, side, 'top');
    this.labelHeat(this.heatKeys, this.keyTokens, win.k0, win.k1, side, 'left');
    var words = 'queries ' + win.q0 + '\u2013' + (win.q1 - 1) + ' \u00d7 keys ' + win.k0 + '\u2013' + (win.k1 - 1);
    this.heatWhere.textContent = 'Layer ' + st.layer + ', head ' + head + ': ' + words;
    this.heatCanvas.setAttribute('aria-label', 'Heatmap of layer ' + st.layer + ' head ' + head + ' (' +
      (st.mode === 'contributions' ? 'contributions' : 'weights') + '), ' + words + ', queries down and keys ' +
      'across, darker where the largest weight is larger. Plus and minus zoom, the arrows move, Enter pins the ' +
      'middle query.');
  };
})(typeof window !== 'undefined' ? window.reportgenViews : require('./views-core.js')); // Node: the same object
