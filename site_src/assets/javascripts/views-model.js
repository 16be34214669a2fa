/*
 * reportgen attention views: the model view, as in bertviz (Vig 2019): every (layer, head)
 * as a thumbnail of its strongest lines on a canvas, drawn only when scrolled into view.
 * The thumbnails are sized from the width (and height) there is, down to THUMB_MIN; below
 * that the grid scrolls inside its own box, with sticky layer and head labels and a hint
 * naming what is out of sight. The current layer's row is highlighted (the layer select and
 * the row labels choose it). A thumbnail opens its head in a dialog over the grid, which
 * leaves the grid where it is. Thumbnails draw weights or contribution shares, as the toolbar's switch
 * says (the widget's source()). Adds its methods to ViewsWidget.prototype (views-widget.js,
 * loaded first).
 */
(function (views) {
  'use strict';

  var el = views.el;
  var range = views.range;
  var THUMB_MIN = 36; // px: thinner thumbnails show no shape; the grid scrolls instead
  var THUMB_MAX = 84; // px: wider ones add nothing the enlarged head does not show better
  var THUMB_RATIO = 1.2; // height / width
  var THUMB_MARGIN = 2; // px around each thumbnail (the grid has no gap, so sticky labels cover what scrolls under)
  var LINE_MIN = 0.01; // fainter lines are invisible in a thumbnail; skipping them keeps drawing cheap
  var MOVES = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] };
  var zoomCount = 0;
  var proto = views.ViewsWidget.prototype;

  // ------------------------------------------------------------------ the grid

  // The layers x heads grid, built when the model view is first shown: a hint, then the scroll box.
  proto.buildGrid = function () {
    var self = this;
    this.gridHint = el('p', 'rgv-grid-hint');
    this.gridHint.hidden = true;
    this.gridBox = el('div', 'rgv-grid-box');
    var grid = el('div', 'rgv-grid');
    grid.setAttribute('role', 'group');
    grid.setAttribute('aria-label', 'layers \u00d7 heads: arrow keys move, Enter enlarges a head or selects a layer');
    grid.style.setProperty('--rgv-cols', String(this.att.heads));
    this.gridCorner = grid.appendChild(el('span', 'rgv-grid-corner'));
    this.headLabels = range(this.att.heads).map(function (h) {
      var label = grid.appendChild(el('span', 'rgv-grid-head', 'H' + h));
      label.style.borderBottomColor = views.headColour(h, self.att.heads);
      return label;
    });
    this.thumbs = [];
    this.layerLabels = range(this.att.layers).map(function (l) {
      var label = grid.appendChild(self.layerLabel(l));
      range(self.att.heads).forEach(function (h) { self.thumbs.push(grid.appendChild(self.thumbCanvas(l, h))); });
      return label;
    });
    grid.addEventListener('keydown', function (event) { self.gridKeydown(event); });
    grid.addEventListener('focusin', function (event) { self.rove(event.target); });
    this.gridBox.appendChild(grid);
    this.modelPanel.appendChild(this.gridHint);
    this.modelPanel.appendChild(this.gridBox);
    this.grid = grid;
    this.rove(this.thumbs[0]);
    this.watchGrid();
  };

  // Lazy drawing (IntersectionObserver), new sizes on resize, and the hint kept in step with scrolling.
  proto.watchGrid = function () {
    var self = this;
    if ('IntersectionObserver' in window) {
      this.observer = new IntersectionObserver(function (entries) {
        entries.forEach(function (entry) { if (entry.isIntersecting) self.drawThumb(entry.target); });
      }, { rootMargin: '200px' });
    }
    var queued = false;
    var update = function () {
      queued = false;
      if (self.modelPanel.hidden) return;
      if (self.sizeGrid()) self.queueThumbs();
      self.updateHint();
    };
    var later = function () {
      if (!queued) requestAnimationFrame(update);
      queued = true;
    };
    this.gridBox.addEventListener('scroll', later, { passive: true });
    if ('ResizeObserver' in window) (this.resizer = new ResizeObserver(later)).observe(this.gridBox);
    else window.addEventListener('resize', later);
  };

  // Takes the grid away (an encoder-decoder's switch to a group of other sizes): built again when next shown.
  proto.dropGrid = function () {
    if (this.observer) this.observer.disconnect();
    if (this.resizer) this.resizer.disconnect();
    this.gridHint.remove();
    this.gridBox.remove();
    this.grid = this.thumbs = this.rover = this.thumbSize = this.observer = this.resizer = null;
    this.gridLayer = this.gridState = undefined;
  };

  // A row's label: a button that makes its layer the current one (highlighted, and in the link).
  proto.layerLabel = function (l) {
    var self = this;
    var label = views.button('rgv-grid-layer', 'L' + l, 'Layer ' + l + ': select this layer');
    label.setAttribute('data-layer', String(l));
    label.setAttribute('tabindex', '-1');
    label.addEventListener('click', function () {
      self.state.layer = l;
      self.state.zoom = false;
      self.render(true);
    });
    return label;
  };

  // One thumbnail: a canvas that acts as a button (click, Enter or Space) enlarging layer l, head h.
  proto.thumbCanvas = function (l, h) {
    var self = this;
    var canvas = el('canvas', 'rgv-thumb');
    canvas.setAttribute('data-layer', String(l));
    canvas.setAttribute('data-head', String(h));
    canvas.setAttribute('role', 'button');
    canvas.setAttribute('tabindex', '-1');
    canvas.setAttribute('aria-label', 'layer ' + l + ' head ' + h + ': enlarge');
    canvas.title = 'Layer ' + l + ', head ' + h;
    canvas.addEventListener('click', function () { self.openHead(l, h); });
    canvas.addEventListener('keydown', function (event) {
      if (event.key !== 'Enter' && event.key !== ' ') return;
      event.preventDefault();
      self.openHead(l, h);
    });
    return canvas;
  };

  proto.openHead = function (l, h) {
    this.state.layer = l;
    this.state.heads = [h];
    this.state.zoom = true;
    this.render(true);
  };

  proto.thumbAt = function (l, h) {
    return this.thumbs[l * this.att.heads + h];
  };

  // The grid is one tab stop (the last cell focused); arrow keys, Home and End move inside it.
  proto.rove = function (cell) {
    if (!cell || cell === this.rover || !this.grid.contains(cell) || !cell.hasAttribute('data-layer')) return;
    if (this.rover) this.rover.setAttribute('tabindex', '-1');
    cell.setAttribute('tabindex', '0');
    this.rover = cell;
  };

  proto.gridKeydown = function (event) {
    var cell = event.target;
    if (!cell.hasAttribute('data-layer')) return;
    var layer = +cell.getAttribute('data-layer');
    var column = cell.hasAttribute('data-head') ? +cell.getAttribute('data-head') : -1; // -1: the row's label
    var move = MOVES[event.key];
    if (move) {
      layer = Math.max(0, Math.min(this.att.layers - 1, layer + move[0]));
      column = Math.max(-1, Math.min(this.att.heads - 1, column + move[1]));
    } else if (event.key === 'Home' || event.key === 'End') {
      column = event.key === 'Home' ? -1 : this.att.heads - 1;
    } else {
      return;
    }
    event.preventDefault();
    var target = column < 0 ? this.layerLabels[layer] : this.thumbAt(layer, column);
    this.rove(target);
    target.focus();
  };

  // ------------------------------------------------------------ size and hint

  // Sets the thumbnail width from the box: all heads across, and all layers within the box's
  // maximum height where that leaves them at least THUMB_MIN wide. True when the width changed.
  proto.sizeGrid = function () {
    var box = this.gridBox;
    var labelWidth = this.gridCorner.offsetWidth;
    var headHeight = this.headLabels[0].offsetHeight;
    var across = (box.clientWidth - labelWidth) / this.att.heads - 2 * THUMB_MARGIN;
    var tall = parseFloat(getComputedStyle(box).maxHeight);
    var down = ((tall - headHeight) / this.att.layers - 2 * THUMB_MARGIN) / THUMB_RATIO;
    var fit = down >= THUMB_MIN ? Math.min(across, down) : across;
    var width = Math.floor(Math.max(THUMB_MIN, Math.min(THUMB_MAX, fit)));
    box.style.scrollPaddingTop = headHeight + 'px';
    box.style.scrollPaddingLeft = labelWidth + 'px';
    this.gridInsets = { left: labelWidth, top: headHeight };
    if (this.thumbSize && this.thumbSize.width === width) return false;
    this.thumbSize = { width: width, height: Math.round(width * THUMB_RATIO) };
    this.grid.style.setProperty('--rgv-thumb-w', width + 'px');
    this.grid.style.setProperty('--rgv-thumb-h', this.thumbSize.height + 'px');
    return true;
  };

  // "Scroll sideways for heads 8-11": what the box hides, worked out from where the labels are.
  proto.updateHint = function () {
    var box = this.gridBox;
    var area = box.getBoundingClientRect();
    var left = area.left + box.clientLeft;
    var top = area.top + box.clientTop;
    var heads = outside(this.headLabels, left + this.gridInsets.left, left + box.clientWidth, 'left', 'right');
    var layers = outside(this.layerLabels, top + this.gridInsets.top, top + box.clientHeight, 'top', 'bottom');
    var parts = [];
    var sideways = heads.before.concat(heads.after);
    if (sideways.length) parts.push('sideways for heads ' + spans(sideways));
    if (layers.before.length) parts.push('up for layers ' + spans(layers.before));
    if (layers.after.length) parts.push('down for layers ' + spans(layers.after));
    var arrow = sideways.length ? '\u2194 ' : '\u2195 ';
    this.gridHint.textContent = parts.length ? arrow + 'Scroll the grid ' + parts.join(', ') : '';
    this.gridHint.hidden = !parts.length;
  };

  // Indices of `nodes` not wholly between `start` and `end` (client px) along one axis: those
  // cut off before the start, and those cut off at the end.
  function outside(nodes, start, end, near, far) {
    var slack = THUMB_MARGIN + 0.5;
    var cut = { before: [], after: [] };
    nodes.forEach(function (node, i) {
      var rect = node.getBoundingClientRect();
      if (rect[near] < start - slack) cut.before.push(i);
      else if (rect[far] > end + slack) cut.after.push(i);
    });
    return cut;
  }

  // [0, 1, 2, 7] -> "0-2 and 7" (ascending input).
  function spans(numbers) {
    var runs = [];
    numbers.forEach(function (value) {
      var last = runs[runs.length - 1];
      if (last && value === last[1] + 1) last[1] = value;
      else runs.push([value, value]);
    });
    return runs.map(function (run) { return run[0] === run[1] ? String(run[0]) : run[0] + '\u2013' + run[1]; })
      .join(' and ');
  }

  // ------------------------------------------------------------------ drawing

  // What a thumbnail's drawing depends on besides its (layer, head): redrawn when it changes.
  proto.thumbKey = function () {
    return this.thumbSize.width + '|' + this.state.filter + '|' + this.state.topk + '|' + this.state.min + '|' +
      this.state.mode;
  };

  proto.drawThumb = function (canvas) {
    var key = this.thumbKey();
    if (canvas.getAttribute('data-drawn') === key) return;
    var h = parseInt(canvas.getAttribute('data-head'), 10);
    var layer = parseInt(canvas.getAttribute('data-layer'), 10);
    if (!this.source().isLoaded(layer, h)) { // loading (waitForData): drawn by the render that follows
      if (views.isLong(this.n, this.m)) this.loadThumb(canvas); // a long input's loads its own (views-heatmap.js)
      return;
    }
    var n = this.n;
    var m = this.m; // keys: n, except in cross-attention, where the lines join n rows on the left to m on the right
    var matrix = this.source().matrix(layer, h); // weights or shares
    var allow = this.allowFn();
    var width = this.thumbSize.width;
    var height = this.thumbSize.height;
    if (views.isLong(n, m)) return this.drawThumbHeat(canvas, matrix, h, key);
    var ctx = thumbContext(canvas, width, height);
    var step = height / n;
    var keyStep = height / m;
    var topk = Math.min(this.state.topk, Math.max(n, m) > views.LONG_INPUT ? 3 : m);
    var min = Math.max(this.state.min, LINE_MIN);
    ctx.strokeStyle = views.headColour(h, this.att.heads);
    ctx.lineWidth = 1;
    for (var q = 0; q < n; q++) {
      var keys = views.pickKeys(matrix, m, q, topk, min, allow);
      for (var j = 0; j < keys.length; j++) {
        ctx.globalAlpha = Math.min(1, matrix[q * m + keys[j]]);
        ctx.beginPath();
        ctx.moveTo(3, (q + 0.5) * step);
        ctx.lineTo(width - 3, (keys[j] + 0.5) * keyStep);
        ctx.stroke();
      }
    }
    ctx.globalAlpha = 1;
    canvas.setAttribute('data-drawn', key);
  };

  // A long input's thumbnail: the whole head as a max-pooled heatmap, a cell per device pixel (views-heatmap.js).
  proto.drawThumbHeat = function (canvas, matrix, h, key) {
    var width = this.thumbSize.width;
    var height = this.thumbSize.height;
    var ratio = window.devicePixelRatio || 1;
    var pooled = views.maxPool(matrix, this.m, { q0: 0, q1: this.n, k0: 0, k1: this.m }, Math.round(height * ratio),
      Math.round(width * ratio), this.poolAllow());
    views.paintHeatmap(canvas, pooled, views.headColour(h, this.att.heads), width, height);
    canvas.setAttribute('data-drawn', key);
  };

  // A cleared 2D context drawing in CSS px on a canvas of device pixels (sharp lines at any zoom).
  function thumbContext(canvas, width, height) {
    var ratio = window.devicePixelRatio || 1;
    var pixelsWide = Math.round(width * ratio);
    var pixelsHigh = Math.round(height * ratio);
    if (canvas.width !== pixelsWide) canvas.width = pixelsWide;
    if (canvas.height !== pixelsHigh) canvas.height = pixelsHigh;
    var ctx = canvas.getContext('2d');
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    return ctx;
  }

  // Thumbnails that are out of date are drawn as they come into view.
  proto.queueThumbs = function () {
    var self = this;
    var key = this.thumbKey();
    this.thumbs.forEach(function (canvas) {
      if (canvas.getAttribute('data-drawn') === key) return;
      if (self.observer) {
        self.observer.unobserve(canvas); // observing again reports visibility afresh
        self.observer.observe(canvas);
      } else {
        self.drawThumb(canvas);
      }
    });
  };

  // Called on every render in the model view: sizes, marks the current layer and the enlarged
  // head, and brings the current layer into sight when it was chosen or linked to (not when a
  // click on one of its thumbnails just enlarged a head).
  proto.drawGrid = function () {
    var st = this.state;
    var first = !this.grid;
    if (first) this.buildGrid();
    this.sizeGrid();
    this.markGrid();
    this.queueThumbs();
    var moved = this.gridLayer !== st.layer;
    var linked = this.gridState !== st; // applyHash replaces the state object: a link was followed
    if (first || linked || (moved && !st.zoom)) this.revealLayer();
    if (moved && !this.grid.contains(document.activeElement)) this.rove(this.thumbAt(st.layer, 0));
    this.gridLayer = st.layer;
    this.gridState = st;
    this.updateHint(); // now, not on a later frame: the hint showing up then would push the grid down
  };

  proto.markGrid = function () {
    var st = this.state;
    this.thumbs.forEach(function (canvas) {
      var layer = +canvas.getAttribute('data-layer');
      var enlarged = st.zoom && layer === st.layer && st.heads.indexOf(+canvas.getAttribute('data-head')) >= 0;
      canvas.classList.toggle('rgv-in-layer', layer === st.layer);
      canvas.classList.toggle('rgv-selected', enlarged);
    });
    this.layerLabels.forEach(function (label, l) {
      label.setAttribute('aria-current', String(l === st.layer));
    });
  };

  // Scrolls the current layer's row to the middle of the box and of the window, unless it is in sight.
  proto.revealLayer = function () {
    var self = this;
    requestAnimationFrame(function () {
      var label = self.layerLabels[self.state.layer];
      if (self.modelPanel.hidden || inSight(label, self.gridBox, self.gridInsets.top)) return;
      label.scrollIntoView({ block: 'center', inline: 'nearest' });
    });
  };

  function inSight(node, box, headHeight) {
    var rect = node.getBoundingClientRect();
    var area = box.getBoundingClientRect();
    var top = Math.max(area.top + box.clientTop + headHeight, 0);
    var bottom = Math.min(area.top + box.clientTop + box.clientHeight, window.innerHeight);
    return rect.top >= top && rect.bottom <= bottom;
  }

  // ---------------------------------------------------------- the enlarged head

  // A dialog over the page with the head view of one head; Escape, the Close button or a click
  // beside it closes it. Built with the panels; the stage moves in while it is open.
  proto.buildZoom = function () {
    var self = this;
    var dialog = el('dialog', 'rgv-zoom');
    dialog.hidden = true;
    var titleId = 'rgv-zoom-title-' + ++zoomCount;
    this.zoomTitle = el('span', 'rgv-zoom-title');
    this.zoomTitle.id = titleId;
    dialog.setAttribute('aria-labelledby', titleId);
    var toHead = views.button('rgv-zoom-head', 'Open in head view', 'This head in the head view, with its toolbar');
    toHead.addEventListener('click', function () {
      self.state.view = 'head';
      self.state.zoom = false;
      self.render(true);
    });
    var close = views.button('rgv-zoom-close', 'Close', 'Back to the grid (Escape)');
    close.autofocus = true;
    close.addEventListener('click', this.setter('zoom', false));
    var bar = el('div', 'rgv-zoom-bar');
    var copy = views.copyControl(function () { return self.hashText(); }); // the toolbar's is behind the dialog
    var parts = [this.zoomTitle, copy, toHead, close];
    if (this.contrib) parts.splice(1, 0, this.buildModeSwitch()); // the toolbar's is behind the dialog too
    parts.forEach(function (node) { bar.appendChild(node); });
    this.zoomBody = el('div', 'rgv-zoom-body');
    dialog.appendChild(bar);
    dialog.appendChild(this.zoomBody);
    dialog.addEventListener('close', function () {
      if (self.state.zoom) self.setter('zoom', false)(); // Escape: the dialog closed itself
    });
    dialog.addEventListener('click', function (event) {
      if (event.target === dialog) self.setter('zoom', false)(); // the backdrop (the dialog has no padding)
    });
    return dialog;
  };

  // Opens or closes the dialog to match the state (render calls this every time).
  proto.placeZoom = function (zoomed) {
    var dialog = this.zoom;
    if (zoomed) {
      var st = this.state;
      this.zoomTitle.textContent = 'Layer ' + st.layer + ', head' + (st.heads.length === 1 ? ' ' : 's ') +
        st.heads.join(', ');
      if (this.stage.parentNode !== this.zoomBody) this.zoomBody.appendChild(this.stage);
      if (!this.zoomShown) this.showZoom(dialog);
      return;
    }
    if (!this.zoomShown) return;
    this.zoomShown = false;
    if (dialog.open) dialog.close();
    dialog.hidden = true;
    this.statusHome.parentNode.insertBefore(this.status, this.statusHome);
    var back = this.state.view === 'model' ? this.thumbAt(this.state.layer, this.state.heads[0] || 0) : this.tabs.head;
    if (back) back.focus();
  };

  proto.showZoom = function (dialog) {
    this.zoomShown = true;
    this.hover = null;
    this.holdPointer(); // the dialog opens under a pointer that has not moved
    if (!this.statusHome) this.statusHome = document.createComment('status');
    if (!this.statusHome.parentNode) this.status.parentNode.insertBefore(this.statusHome, this.status);
    this.zoomBody.appendChild(this.status); // the head view's status line says what the lines show
    dialog.hidden = false;
    if (typeof dialog.showModal === 'function') dialog.showModal();
    else dialog.setAttribute('open', '');
  };

})(window.reportgenViews);
