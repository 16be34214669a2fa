/*
 * reportgen attention views, the core: shared helpers, 8-bit decoding, top-k key selection,
 * the deep-link format, the query/key arithmetic and the copy-link control (also used by charts.js).
 *
 * Written for reportgen (no third-party code). Pages are static and may be opened from file://,
 * where ES modules do not load, so the views are classic scripts sharing one namespace,
 * window.reportgenViews, loaded in this order (mkdocs.yml `extra_javascript`, and
 * reportgen/views.py `standalone_page`):
 *   views-core.js    this file: everything the others share; pure parts also load in Node (tests/js/)
 *   charts.js        Vega-Lite charts and their copy-link buttons (uses copyLink from here)
 *   views-widget.js  the head/model view widget: state, toolbar, rendering, its deep link
 *   views-head.js    the head view: token columns and the lines between them
 *   views-model.js   the model view: a grid of thumbnails, one per (layer, head)
 *   views-qk.js      the query/key view
 *   views-start.js   finds the views on a page and starts them; follows hash changes
 *
 * The data is embedded in the page as
 *   <div class="rgv" data-rgv="views|qk"><script type="application/json" class="rgv-data">…</script></div>
 * and nothing is fetched. Every piece of user text (tokens, sentences) reaches the
 * DOM through textContent or setAttribute, never through innerHTML.
 *
 * Test hooks: the root gets data-rgv-state (its hash text) after each render and
 * data-first-render-ms after the first; drawn lines are <line class="rgv-line">
 * with data-q/data-k/data-head/data-w; shown weights are <span class="rgv-num">
 * with the same attributes.
 */
(function () {
  'use strict';

  var views = {};
  var SVG_NS = 'http://www.w3.org/2000/svg';

  views.LONG_INPUT = 64; // above this many tokens the views start sparse (top-k, threshold, one head)
  views.FILTERS = ['all', 'AA', 'AB', 'BA', 'BB'];

  // ---------------------------------------------------------------- helpers

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  // A row of controls that belong together (tabs, toggles, filters), announced as one group.
  function group(className, label) {
    var node = el('div', className);
    node.setAttribute('role', 'group');
    if (label) node.setAttribute('aria-label', label);
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
    var node = el('button', className, label);
    node.type = 'button';
    if (title) node.title = title;
    return node;
  }

  function labelled(text, control) {
    var wrap = el('label', 'rgv-field');
    wrap.appendChild(el('span', 'rgv-field-label', text));
    wrap.appendChild(control);
    return wrap;
  }

  function selectOf(className, options) {
    var select = el('select', className);
    options.forEach(function (option) {
      var node = el('option', null, option[1]);
      node.value = String(option[0]);
      select.appendChild(node);
    });
    return select;
  }

  // A select of "<label> 0" .. "<label> count-1", valued 0 .. count-1 (layers, heads).
  function numberedSelect(className, count, label) {
    return selectOf(className, range(count).map(function (i) { return [i, label + ' ' + i]; }));
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

  function markFirstRender(root, started) {
    var now = performance.now();
    root.setAttribute('data-first-render-ms', (now - started).toFixed(1));
    root.setAttribute('data-first-render-at', now.toFixed(1));
    try {
      performance.measure('rgv-first-render', { start: started, end: now });
    } catch (err) {
      /* older browsers without measure options: the data attributes still hold the figures */
    }
  }

  // ------------------------------------------------------------- decoding

  // atob is a global in browsers and in Node >= 16.
  function base64Bytes(text) {
    var binary = atob(text);
    var out = new Uint8Array(binary.length);
    for (var i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
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
   * One (layer, head) of the "u8-row-affine" encoding of reportgen/views.py, as an n x n
   * Float64Array: w[r][k] = floor[first + r] + codes[r * n + k] * scale[first + r],
   * where `first` is the (layer, head)'s first row in the flat floor/scale arrays.
   */
  function decodeRows(codes, floor, scale, first, n) {
    var out = new Float64Array(n * n);
    for (var r = 0; r < n; r++) {
      var base = floor[first + r];
      var step = scale[first + r];
      for (var k = 0; k < n; k++) out[r * n + k] = base + codes[r * n + k] * step;
    }
    return out;
  }

  /*
   * The attention of a payload. One base64 chunk per (layer, head), decoded on first
   * use; long inputs keep only a few decoded heads (2 MB each at 512 tokens).
   */
  function Attention(encoded) {
    if (encoded.encoding !== 'u8-row-affine') throw new Error('unknown attention encoding: ' + encoded.encoding);
    this.layers = encoded.shape[0];
    this.heads = encoded.shape[1];
    this.n = encoded.shape[2];
    this.chunks = encoded.q;
    this.floor = base64Float32(encoded.floor);
    this.scale = base64Float32(encoded.scale);
    this.cache = new Map();
    this.cacheLimit = this.n * this.n > 100000 ? 8 : Infinity;
  }

  Attention.prototype.matrix = function (layer, head) {
    var id = layer * this.heads + head;
    var matrix = this.cache.get(id);
    if (matrix) {
      this.cache.delete(id); // re-insert: Map order doubles as least-recently-used order
      this.cache.set(id, matrix);
      return matrix;
    }
    matrix = decodeRows(base64Bytes(this.chunks[id]), this.floor, this.scale, id * this.n, this.n);
    this.cache.set(id, matrix);
    if (this.cache.size > this.cacheLimit) this.cache.delete(this.cache.keys().next().value);
    return matrix;
  };

  // Sentence of each token for the pair filter. Special tokens join the sentence
  // before them ([CLS] and the middle [SEP] go with A, the last [SEP] with B), as in bertviz.
  function pairGroups(segments) {
    var group = 0;
    return segments.map(function (segment) {
      if (segment === 0 || segment === 1) group = segment;
      return group ? 'B' : 'A';
    });
  }

  // Keys that query row q of the n x n `matrix` attends to, largest first: at most topk
  // of them, each >= min and allowed by allow(q, k). Ties keep the earlier key first.
  function pickKeys(matrix, n, q, topk, min, allow) {
    var picked = [];
    var row = q * n;
    for (var k = 0; k < n; k++) {
      var weight = matrix[row + k];
      if (weight < min || !allow(q, k)) continue;
      if (picked.length < topk) {
        picked.push(k);
      } else if (weight > matrix[row + picked[picked.length - 1]]) {
        picked[picked.length - 1] = k;
      } else {
        continue;
      }
      // keep `picked` sorted by weight, descending (topk is small, insertion is enough)
      for (var i = picked.length - 1; i > 0 && matrix[row + picked[i]] > matrix[row + picked[i - 1]]; i--) {
        var swap = picked[i];
        picked[i] = picked[i - 1];
        picked[i - 1] = swap;
      }
    }
    return picked;
  }

  // ------------------------------------------------------ query/key arithmetic

  /*
   * The query/key table of one query token: for every key k, the elementwise products
   * q * k, the dot product q . k and softmax(q . k * scaling) over the keys, the scaled
   * dot-product attention of Vaswani et al. 2017 ("Attention Is All You Need", eq. 1).
   * queries/keys: [n * dim] of one (layer, head). maxAbs and maxProduct scale the colours.
   */
  function queryKeyRows(queries, keys, token, dim, scaling) {
    var n = keys.length / dim;
    var first = token * dim;
    var products = new Float64Array(n * dim);
    var dots = new Float64Array(n);
    var maxAbs = 0;
    var maxProduct = 0;
    for (var i = 0; i < queries.length; i++) maxAbs = Math.max(maxAbs, Math.abs(queries[i]), Math.abs(keys[i]));
    for (var k = 0; k < n; k++) {
      for (var d = 0; d < dim; d++) {
        var product = queries[first + d] * keys[k * dim + d];
        products[k * dim + d] = product;
        dots[k] += product;
        maxProduct = Math.max(maxProduct, Math.abs(product));
      }
    }
    return { products: products, dots: dots, softmax: softmax(dots, scaling), maxAbs: maxAbs, maxProduct: maxProduct };
  }

  // softmax(values * scaling), shifted by the maximum for stability.
  function softmax(values, scaling) {
    var top = -Infinity;
    for (var k = 0; k < values.length; k++) top = Math.max(top, values[k] * scaling);
    var out = new Float64Array(values.length);
    var total = 0;
    for (k = 0; k < values.length; k++) {
      out[k] = Math.exp(values[k] * scaling - top);
      total += out[k];
    }
    for (k = 0; k < values.length; k++) out[k] /= total;
    return out;
  }

  // ------------------------------------------------------------ deep links

  /*
   * The deep-link format, defined here once for every view (reportgen/report.py `head_link` and `model_link`
   * writes the same links from Python: keep the two in step). The first widget on a page owns the hash:
   *   #view=head&layer=2&head=0,3&token=4&filter=AB&topk=5&min=0.02
   *   #view=model&layer=2&head=5          (model view with layer 2 / head 5 enlarged)
   *   #view=qk&layer=2&head=5&token=4     (query/key page)
   * `heads` is read as another spelling of `head`; it is never written.
   */
  var HASH_KEYS = ['view', 'layer', 'head', 'heads', 'token', 'key', 'filter', 'topk', 'min'];
  var HASH_ORDER = ['view', 'layer', 'head', 'token', 'key', 'filter', 'topk', 'min'];

  // Hash text (without '#') for `fields`, in HASH_ORDER; null or undefined fields are left out, lists joined by ','.
  function formatHash(fields) {
    var params = new URLSearchParams();
    HASH_ORDER.forEach(function (name) {
      var value = fields[name];
      if (value === null || value === undefined) return;
      params.set(name, Array.isArray(value) ? value.join(',') : String(value));
    });
    return params.toString().replace(/%2C/g, ',');
  }

  function intParam(params, name, limit) {
    var raw = params.get(name);
    if (raw === null || !/^\d+$/.test(raw)) return null;
    var value = parseInt(raw, 10);
    return value < limit ? value : null;
  }

  // Distinct heads below `limit`, ascending; anything else in the list is dropped.
  function headList(text, limit) {
    return text.split(',').filter(function (part) { return /^\d+$/.test(part) && +part < limit; })
      .map(Number).filter(function (head, i, all) { return all.indexOf(head) === i; })
      .sort(function (a, b) { return a - b; });
  }

  /*
   * The state a hash describes, checked against limits = {layers, heads, tokens}: every field
   * is null where the link does not give it or gives a value out of range. `head` is a single
   * head (query/key view), `heads` the list (head and model view). Returns null for a hash that
   * is not ours (an ordinary heading anchor).
   */
  function parseHash(text, limits) {
    var raw = String(text).replace(/^#/, '');
    if (raw.indexOf('=') < 0) return null;
    var params = new URLSearchParams(raw);
    if (!HASH_KEYS.some(function (name) { return params.has(name); })) return null;
    var headText = params.get('head') !== null ? params.get('head') : params.get('heads');
    var filter = params.get('filter');
    var min = parseFloat(params.get('min'));
    return {
      view: params.get('view'),
      layer: intParam(params, 'layer', limits.layers),
      head: intParam(params, 'head', limits.heads),
      heads: headText === null ? null : headList(headText, limits.heads),
      token: intParam(params, 'token', limits.tokens),
      key: intParam(params, 'key', limits.tokens),
      filter: views.FILTERS.indexOf(filter) >= 0 ? filter : null,
      topk: intParam(params, 'topk', limits.tokens + 1) || null, // 0 is no top-k
      min: isFinite(min) && min >= 0 && min <= 1 ? min : null,
    };
  }

  function readHash(limits) {
    return parseHash(location.hash, limits);
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

  // ------------------------------------------------------------- copy link

  // The page's address with `fragment` (an element id, or a view's hash text).
  function linkTo(fragment) {
    return location.href.split('#')[0] + '#' + fragment;
  }

  // Puts `link` on the clipboard, then calls done(); calls fallback() where that is refused or
  // not possible (the Clipboard API exists only in secure contexts: https, localhost, file://).
  function copyLink(link, done, fallback) {
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(link).then(done, function () { fallback(); });
    } else {
      fallback();
    }
  }

  // A view's "copy link" control: clipboard when allowed, otherwise a selected text box.
  function copyControl(getHash) {
    var wrap = el('span', 'rgv-copy-wrap');
    var trigger = button('rgv-copy', 'Copy link', 'Copy a link to exactly this view');
    var box = el('input', 'rgv-link');
    box.readOnly = true;
    box.hidden = true;
    box.setAttribute('aria-label', 'link to this view');
    var note = el('span', 'rgv-copy-note');
    trigger.addEventListener('click', function () {
      var link = linkTo(getHash());
      box.value = link;
      box.hidden = false;
      copyLink(link, function () { note.textContent = 'Link copied'; }, function () {
        box.select();
        note.textContent = 'Select the link and copy it';
      });
    });
    wrap.appendChild(trigger);
    wrap.appendChild(box);
    wrap.appendChild(note);
    return wrap;
  }

  // ---------------------------------------------------------------- export

  var exported = {
    el: el, group: group, svgEl: svgEl, range: range, button: button, labelled: labelled, selectOf: selectOf,
    numberedSelect: numberedSelect, headColour: headColour, markFirstRender: markFirstRender,
    base64Bytes: base64Bytes, base64Float32: base64Float32, decodeRows: decodeRows, Attention: Attention,
    pairGroups: pairGroups, pickKeys: pickKeys, queryKeyRows: queryKeyRows, softmax: softmax,
    formatHash: formatHash, parseHash: parseHash, readHash: readHash, writeHash: writeHash,
    linkTo: linkTo, copyLink: copyLink, copyControl: copyControl,
  };
  Object.keys(exported).forEach(function (name) { views[name] = exported[name]; });

  if (typeof window !== 'undefined') window.reportgenViews = views;
  if (typeof module !== 'undefined' && module.exports) module.exports = views;
})();
