/*
 * reportgen attention views: the model view, as in bertviz (Vig 2019): every (layer, head)
 * as a thumbnail of its strongest lines on a canvas, drawn only when scrolled into view;
 * a click enlarges one into the head view's stage. Adds its methods to ViewsWidget.prototype
 * (views-widget.js, loaded first).
 */
(function (views) {
  'use strict';

  var el = views.el;
  var range = views.range;
  var THUMB_W = 60;
  var THUMB_H = 76;
  var THUMB_MIN = 0.01; // fainter lines are invisible in a thumbnail; skipping them keeps drawing cheap
  var proto = views.ViewsWidget.prototype;

  // The layers x heads grid, built when the model view is first shown.
  proto.buildGrid = function () {
    var self = this;
    var grid = el('div', 'rgv-grid');
    grid.style.setProperty('--rgv-cols', String(this.att.heads));
    grid.appendChild(el('span', 'rgv-grid-corner'));
    range(this.att.heads).forEach(function (h) { grid.appendChild(el('span', 'rgv-grid-head', 'H' + h)); });
    this.thumbs = [];
    range(this.att.layers).forEach(function (l) {
      grid.appendChild(el('span', 'rgv-grid-layer', 'L' + l));
      range(self.att.heads).forEach(function (h) {
        var canvas = self.thumbCanvas(l, h);
        grid.appendChild(canvas);
        self.thumbs.push(canvas);
      });
    });
    if ('IntersectionObserver' in window) {
      this.observer = new IntersectionObserver(function (entries) {
        entries.forEach(function (entry) { if (entry.isIntersecting) self.drawThumb(entry.target); });
      }, { rootMargin: '200px' });
    }
    this.modelPanel.appendChild(grid);
    this.grid = grid;
  };

  // One thumbnail: a canvas that acts as a button (click, Enter or Space) enlarging layer l, head h.
  proto.thumbCanvas = function (l, h) {
    var self = this;
    var canvas = el('canvas', 'rgv-thumb');
    canvas.width = THUMB_W;
    canvas.height = THUMB_H;
    canvas.setAttribute('data-layer', String(l));
    canvas.setAttribute('data-head', String(h));
    canvas.setAttribute('role', 'button');
    canvas.setAttribute('tabindex', '0');
    canvas.setAttribute('aria-label', 'layer ' + l + ' head ' + h + ': enlarge');
    canvas.title = 'Layer ' + l + ', head ' + h;
    var open = function () {
      self.state.layer = l;
      self.state.heads = [h];
      self.state.zoom = true;
      self.render(true);
    };
    canvas.addEventListener('click', open);
    canvas.addEventListener('keydown', function (event) {
      if (event.key === 'Enter' || event.key === ' ') {
        event.preventDefault();
        open();
      }
    });
    return canvas;
  };

  // What a thumbnail's drawing depends on besides its (layer, head): redrawn when it changes.
  proto.thumbKey = function () {
    return this.state.filter + '|' + this.state.topk + '|' + this.state.min;
  };

  proto.drawThumb = function (canvas) {
    var key = this.thumbKey();
    if (canvas.getAttribute('data-drawn') === key) return;
    var h = parseInt(canvas.getAttribute('data-head'), 10);
    var n = this.n;
    var matrix = this.att.matrix(parseInt(canvas.getAttribute('data-layer'), 10), h);
    var allow = this.allowFn();
    var ctx = canvas.getContext('2d');
    var step = THUMB_H / n;
    var topk = Math.min(this.state.topk, n > views.LONG_INPUT ? 3 : n);
    var min = Math.max(this.state.min, THUMB_MIN);
    ctx.clearRect(0, 0, THUMB_W, THUMB_H);
    ctx.strokeStyle = views.headColour(h, this.att.heads);
    ctx.lineWidth = 1;
    for (var q = 0; q < n; q++) {
      var keys = views.pickKeys(matrix, n, q, topk, min, allow);
      for (var j = 0; j < keys.length; j++) {
        ctx.globalAlpha = Math.min(1, matrix[q * n + keys[j]]);
        ctx.beginPath();
        ctx.moveTo(4, (q + 0.5) * step);
        ctx.lineTo(THUMB_W - 4, (keys[j] + 0.5) * step);
        ctx.stroke();
      }
    }
    ctx.globalAlpha = 1;
    canvas.setAttribute('data-drawn', key);
  };

  // Marks the enlarged cell; thumbnails that are out of date are drawn as they come into view.
  proto.drawGrid = function () {
    var self = this;
    if (!this.grid) this.buildGrid();
    var key = this.thumbKey();
    this.thumbs.forEach(function (canvas) {
      var selected = self.state.zoom && self.state.layer === +canvas.getAttribute('data-layer') &&
        self.state.heads.indexOf(+canvas.getAttribute('data-head')) >= 0;
      canvas.classList.toggle('rgv-selected', selected);
      if (canvas.getAttribute('data-drawn') === key) return;
      if (self.observer) {
        self.observer.unobserve(canvas); // observing again reports visibility afresh
        self.observer.observe(canvas);
      } else {
        self.drawThumb(canvas);
      }
    });
  };
})(window.reportgenViews);
