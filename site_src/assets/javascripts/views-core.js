/*
 * reportgen attention views, the core: shared helpers, 8-bit decoding, top-k key selection,
 * the deep-link format, the query/key arithmetic and the copy-link control (also used by charts.js).
 *
 * Written for reportgen (no third-party code). Pages are static and may be opened from file://,
 * where ES modules do not load, so the views are classic scripts sharing one namespace,
 * window.reportgenViews, loaded in this order (mkdocs.yml `extra_javascript`, and
 * reportgen/site/views.py `standalone_page`):
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
 * and nothing is fetched: a site's page carries its first view's data there and loads the rest, when a view
 * draws it, from script files beside the page (DataFiles).
 * Every piece of user text (tokens, sentences) reaches the DOM through textContent or
 * setAttribute, never through innerHTML.
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
  // Above this many tokens the views add heatmaps (views-heatmap.js, which a single-file view of a shorter input
  // leaves out): reportgen/site/attention_encoding.py LONG_ROW, where the rows are also deflated.
  views.HEATMAP_FROM = 256;
  views.isLong = function (n, m) { return Math.max(n, m) > views.HEATMAP_FROM; };
  views.FILTERS = ['all', 'AA', 'AB', 'BA', 'BB'];
  // What the head and model views draw: attention weights, or contributions (Kobayashi et al. 2020, the
  // per-row shares of ||A[i, j] f(x_j)||; reportgen/site/views.py encode_contributions). The first is the default.
  views.MODES = ['weights', 'contributions'];
  // How many float32 rows follow a packed chunk's codes (reportgen/site/views.py PACKED_ATTENTION, PACKED_CONTRIBUTIONS).
  var PACKED_ROWS = { 'codes,floor,scale': 2, 'codes,floor,scale,total': 3 };

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

  // A numberedSelect bound to view.state[key]: a choice sets it and redraws the view (into the link).
  // The widget's layer and the query/key view's layer and head are such selects.
  function stateSelect(view, key, className, count, label) {
    var select = numberedSelect(className, count, label);
    select.addEventListener('change', function () {
      view.state[key] = parseInt(select.value, 10);
      view.render(true);
    });
    return select;
  }

  /*
   * Head colours, one per head for up to 16 heads (BERT-large). Lines and colour chips are
   * non-text graphics, so each colour has at least 3:1 contrast against the white page
   * (WCAG 2.1, 1.4.11 non-text contrast); tests/js/colours.test.js checks that, and that the
   * 16 differ pairwise by a CIELAB distance over 30. Picked by farthest-point selection among
   * mid-tone OKLCH colours, so any first N (small models) are as distinct as the set allows;
   * head 2 (the previous-token head of the findings) is the vermilion. Ordered so that among the
   * first 12 (BERT-base) two colours of nearly the same hue differ clearly in lightness: the second
   * mid blue, which a reader could not tell from head 0's, comes last (issue 28). Weights are printed
   * in the page's text colour beside a chip, never in these colours.
   */
  var HEAD_COLOURS = [
    '#2e84d2', '#41962c', '#e03b2a', '#ad3ced', '#7b1a52', '#5b4314', '#31918c', '#cf34a9',
    '#174d69', '#641d8a', '#b9692a', '#821b1e', '#dc3570', '#18552b', '#85862b', '#2e5fea',
  ];
  // The weights table tints a cell with its head's colour at this opacity times the weight: at
  // weight 1 the page's dark text still has 4.5:1 on every head colour (tests/js/colours.test.js).
  var HEAD_TINT = 0.45;

  // WCAG 2.1 relative luminance of an sRGB colour given as 0-255 channels.
  function relativeLuminance(rgb) {
    var linear = rgb.map(function (channel) {
      var c = channel / 255;
      return c <= 0.04045 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2];
  }

  // HSL (hue in degrees, saturation and lightness 0-1) to 0-255 sRGB channels.
  function hslChannels(hue, sat, light) {
    var chroma = (1 - Math.abs(2 * light - 1)) * sat;
    return [0, 8, 4].map(function (offset) {
      var k = (offset + hue / 30) % 12;
      return Math.round(255 * (light - chroma / 2 * Math.max(-1, Math.min(k - 3, 9 - k, 1))));
    });
  }

  // Heads past 16: golden-angle hues (no two nearby heads share one), each darkened until its
  // luminance reaches a target low enough for 3:1 against white (luminance 0.30 at most).
  function generatedColour(head) {
    var hue = (head * 137.508) % 360;
    var target = head % 2 ? 0.12 : 0.2;
    var low = 0;
    var high = 1;
    for (var step = 0; step < 20; step++) {
      var mid = (low + high) / 2;
      if (relativeLuminance(hslChannels(hue, 0.7, mid)) > target) high = mid;
      else low = mid;
    }
    return '#' + hslChannels(hue, 0.7, low).map(function (c) { return (256 + c).toString(16).slice(1); }).join('');
  }

  // Head `head`'s colour among `heads` heads (the palette above up to 16, generated beyond).
  function headColour(head, heads) {
    return head < HEAD_COLOURS.length && heads <= HEAD_COLOURS.length ? HEAD_COLOURS[head] : generatedColour(head);
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
   * One (layer, head) of the "u8-row-affine" encoding of reportgen/site/views.py, as an n x m
   * Float64Array (m keys per row, n by default): w[r][k] = floor[first + r] + codes[r * m + k] * scale[first + r],
   * where `first` is the (layer, head)'s first row in the flat floor/scale arrays. Rectangular: an
   * encoder-decoder's cross-attention, n decoder tokens over m source tokens.
   */
  function decodeRows(codes, floor, scale, first, n, m) {
    var cols = m === undefined ? n : m;
    var out = new Float64Array(n * cols);
    for (var r = 0; r < n; r++) {
      var base = floor[first + r];
      var step = scale[first + r];
      for (var k = 0; k < cols; k++) out[r * cols + k] = base + codes[r * cols + k] * step;
    }
    return out;
  }

  /*
   * Bytes in zlib's format (reportgen/site/attention_encoding.py deflate: a long input's chunks) inflated by the
   * browser's own DecompressionStream, which runs from file:// too: a Promise of a Uint8Array.
   */
  function inflate(bytes) {
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate'));
    return new Response(stream).arrayBuffer().then(function (buffer) { return new Uint8Array(buffer); });
  }

  /*
   * One packed chunk's rows (reportgen/site/view_files.py pack_heads): after its codes (n x m bytes), `rows`
   * float32 arrays of n each, little-endian: floor, scale and, for contributions, each row's total.
   */
  function unpackHead(bytes, n, m, rows) {
    if (bytes.length !== n * m + 4 * rows * n) {
      throw new Error('a head\'s data of ' + bytes.length + ' bytes for ' + n + ' x ' + m + ' tokens');
    }
    var all = float32At(bytes, n * m, rows * n);
    return range(rows).map(function (row) { return all.slice(row * n, (row + 1) * n); });
  }

  // Data files beside a site's page: views-files.js (views.DataFiles), which a single file leaves out.

  // "1.2 MB", "350 KB": the size a loading note quotes.
  function sizeText(bytes) {
    return bytes >= 1e6 ? (bytes / 1e6).toFixed(1) + ' MB' : Math.max(1, Math.round(bytes / 1e3)) + ' KB';
  }

  var DECODED_BYTES = 256 * 1024 * 1024; // the decoded heads a long input's Attention keeps (matrix())

  /*
   * The attention of a payload. One base64 chunk per (layer, head), decoded on first use; long inputs keep
   * only a few decoded heads (2 MB each at 512 tokens). The chunks are either all inline in `q` (a notebook's
   * or `reportgen view`'s payload), with floor and scale as flat float32 arrays over every row, or packed
   * (`packed`, a site's page: reportgen/site/view_files.py): each chunk carries its head's codes [n * m],
   * then its rows' floor and scale [n] each, some chunks inline (`inline`: {chunk: base64}), the rest in data
   * files (`files`, chunks named <prefix>l<layer>h<head>). matrix() needs the head loaded: ensure() first
   * where the data may be in files.
   *
   * The same class reads a payload's contributions (prefix 'c-'): the per-row shares in the same
   * encoding, plus each row's total sum_j ||A[i, j] f(x_j)|| (rowTotals): inline a flat float32 array
   * like floor and scale, packed after each chunk's scale (PACKED_CONTRIBUTIONS).
   *
   * A long input's chunks are deflated (`compressed`: 'deflate'; reportgen/site/attention_encoding.py): a packed
   * chunk whole, an inline one its codes. Inflating is asynchronous, so such a head is loaded only once ensure()
   * has inflated it (`inflated`, kept while the page is open: the views draw a head again and again).
   */
  function Attention(encoded, prefix) {
    if (encoded.encoding !== 'u8-row-affine') throw new Error('unknown attention encoding: ' + encoded.encoding);
    if (encoded.packed && !PACKED_ROWS[encoded.packed]) throw new Error('unknown packing: ' + encoded.packed);
    if (encoded.compressed && encoded.compressed !== 'deflate') {
      throw new Error('unknown compression: ' + encoded.compressed);
    }
    this.compressed = Boolean(encoded.compressed);
    this.inflated = new Map(); // compressed: (layer, head) id -> its chunk's bytes, inflated
    this.layers = encoded.shape[0];
    this.heads = encoded.shape[1];
    this.n = encoded.shape[2]; // query rows
    this.m = encoded.shape[3]; // keys per row: n, except in an encoder-decoder's cross-attention
    this.prefix = prefix || '';
    this.chunks = encoded.q || null;
    this.inline = encoded.inline || {};
    this.files = encoded.files ? new views.DataFiles(encoded.files) : null;
    this.packed = encoded.packed ? PACKED_ROWS[encoded.packed] : 0; // float32 rows after a chunk's codes
    this.floor = this.packed ? null : base64Float32(encoded.floor);
    this.scale = this.packed ? null : base64Float32(encoded.scale);
    this.totals = encoded.total && !this.packed ? base64Float32(encoded.total) : null;
    this.headTotals = new Map(); // packed: (layer, head) id -> its rows' totals, kept when the matrix is decoded
    this.cache = new Map();
    // Decoded heads kept (Float32, 4 bytes a weight): all of a short input's; of a long one's 8, and no more than
    // DECODED_BYTES of them (at 4,096 tokens a head is 67 MB: 2 are kept, not 8).
    var fits = Math.floor(DECODED_BYTES / (4 * this.n * this.m));
    this.cacheLimit = this.n * this.m > 100000 ? Math.max(2, Math.min(8, fits)) : Infinity;
  }

  Attention.prototype.chunkName = function (layer, head) {
    return this.prefix + 'l' + layer + 'h' + head;
  };

  Attention.prototype.chunkText = function (layer, head) {
    if (this.chunks) return this.chunks[layer * this.heads + head];
    var name = this.chunkName(layer, head);
    if (typeof this.inline[name] === 'string') return this.inline[name];
    return this.files ? this.files.text(name) : null;
  };

  Attention.prototype.isLoaded = function (layer, head) {
    if (this.compressed) return this.inflated.has(layer * this.heads + head);
    return this.chunkText(layer, head) !== null;
  };

  // The (layer, head)'s chunk as bytes: decoded from base64, or as ensure() inflated it.
  Attention.prototype.chunkBytes = function (layer, head) {
    var bytes = this.compressed ? this.inflated.get(layer * this.heads + head) : null;
    var text = this.compressed ? null : this.chunkText(layer, head);
    if (!bytes && text === null) throw new Error('layer ' + layer + ' head ' + head + ' is not loaded yet');
    return bytes || base64Bytes(text);
  };

  // Every (layer, head) as [layer, head] pairs: what the model view draws.
  Attention.prototype.allHeads = function () {
    var pairs = [];
    for (var layer = 0; layer < this.layers; layer++) {
      for (var head = 0; head < this.heads; head++) pairs.push([layer, head]);
    }
    return pairs;
  };

  // Loads the [layer, head] pairs not loaded yet (their files, then inflating them), then calls done(error or null).
  Attention.prototype.request = function (pairs, done) {
    var self = this;
    var away = pairs.filter(function (pair) { return self.chunkText(pair[0], pair[1]) === null; });
    var then = function (error) { return error || !self.compressed ? done(error) : self.inflate(pairs, done); };
    if (!away.length) return then(null);
    if (!this.files) return done(new Error('this page has no data for ' + this.names(away).join(', ')));
    this.files.request(this.names(away), then);
  };

  // Inflates the chunks of the [layer, head] pairs not inflated yet, all at once, then calls done(error or null).
  Attention.prototype.inflate = function (pairs, done) {
    var self = this;
    Promise.all(pairs.map(function (pair) {
      var id = pair[0] * self.heads + pair[1];
      if (self.inflated.has(id)) return null;
      return inflate(base64Bytes(self.chunkText(pair[0], pair[1]))).then(function (bytes) {
        self.inflated.set(id, bytes);
      });
    })).then(function () { done(null); }, function (error) {
      done(new Error('The data of ' + self.names(pairs).join(', ') + ' could not be decompressed: ' + error.message));
    });
  };

  Attention.prototype.names = function (pairs) {
    var self = this;
    return pairs.map(function (pair) { return self.chunkName(pair[0], pair[1]); });
  };

  /*
   * null when every [layer, head] pair is loaded; otherwise starts loading them, calls
   * done(error or null) when they are in, and returns the note to show meanwhile
   * ("Loading layer 3 head 5 (350 KB)…").
   */
  Attention.prototype.ensure = function (pairs, done) {
    var self = this;
    var missing = pairs.filter(function (pair) { return !self.isLoaded(pair[0], pair[1]); });
    if (!missing.length) return null;
    var what;
    if (missing.length === 1) {
      what = 'layer ' + missing[0][0] + ' head ' + missing[0][1];
    } else if (missing.length === this.layers * this.heads) {
      what = 'all ' + missing.length + ' heads';
    } else {
      what = missing.length + ' heads';
    }
    var bytes = this.files ? this.files.missingFiles(this.names(missing)).length * this.files.bytes : 0;
    this.request(missing, done);
    var whose = (this.prefix === 'c-' ? 'the contributions of ' : '') + what;
    return bytes ? 'Loading ' + whose + ' (' + sizeText(bytes) + ')\u2026' : 'Decompressing ' + whose + '\u2026';
  };

  Attention.prototype.matrix = function (layer, head) {
    var id = layer * this.heads + head;
    var matrix = this.cache.get(id);
    if (matrix) {
      this.cache.delete(id); // re-insert: Map order doubles as least-recently-used order
      this.cache.set(id, matrix);
      return matrix;
    }
    var n = this.n;
    var bytes = this.chunkBytes(layer, head);
    if (this.packed) {
      var rows = unpackHead(bytes, n, this.m, this.packed); // floor, scale[, total]
      matrix = decodeRows(bytes, rows[0], rows[1], 0, n, this.m);
      if (rows[2]) this.headTotals.set(id, rows[2]);
    } else {
      matrix = decodeRows(bytes, this.floor, this.scale, id * n, n, this.m);
    }
    this.cache.set(id, matrix);
    if (this.cache.size > this.cacheLimit) this.cache.delete(this.cache.keys().next().value);
    return matrix;
  };

  // Contributions: the (layer, head)'s per-row totals sum_j ||A[i, j] f(x_j)|| (Float32Array [n]), so
  // that share * total is ||A[i, j] f(x_j)||; null for attention, which has none. Needs the head loaded.
  Attention.prototype.rowTotals = function (layer, head) {
    var id = layer * this.heads + head;
    if (this.totals) return this.totals.subarray(id * this.n, (id + 1) * this.n);
    if (this.packed !== 3) return null;
    if (!this.headTotals.has(id)) this.matrix(layer, head);
    return this.headTotals.get(id);
  };

  /*
   * Attention's interface over matrices computed on the page itself (the "Your sentence" page runs the model in
   * the browser: live-page.js), every head in memory: `values` is a Float32Array [layers * heads * n * m] in
   * (layer, head, query, key) order.
   */
  function MatrixSource(layers, heads, n, m, values) {
    if (values.length !== layers * heads * n * m) throw new Error('the matrices do not have the shape they say');
    this.layers = layers;
    this.heads = heads;
    this.n = n;
    this.m = m;
    this.values = values;
  }

  MatrixSource.prototype.allHeads = Attention.prototype.allHeads;
  MatrixSource.prototype.ensure = function () { return null; };
  MatrixSource.prototype.isLoaded = function () { return true; };
  MatrixSource.prototype.rowTotals = function () { return null; };
  MatrixSource.prototype.matrix = function (layer, head) {
    var size = this.n * this.m;
    var id = layer * this.heads + head;
    return this.values.subarray(id * size, (id + 1) * size);
  };

  /*
   * Contributions computed here from the 8-bit weights and each key's value norm ||f(x_j)|| (float32 [L*H*T],
   * encoding "norms-f32": reportgen/site/views.py encode_norms), which a single-file view carries instead of a
   * second 8-bit matrix per head: share[i, j] = A[i, j] n[j] / sum_k A[i, k] n[k] (Kobayashi et al. 2020), a
   * row with nothing to pass on keeping its weights (reportgen/runs.py shares). Attention's interface.
   */
  function NormContributions(attention, encoded) {
    if (encoded.encoding !== 'norms-f32') throw new Error('unknown contribution encoding: ' + encoded.encoding);
    this.att = attention;
    this.layers = attention.layers;
    this.heads = attention.heads;
    this.n = attention.n;
    this.m = attention.m;
    // [L * H * m]: the keys' value norms (a Float32Array when the page computed them itself: MatrixSource)
    this.norms = typeof encoded.norms === 'string' ? base64Float32(encoded.norms) : encoded.norms;
    this.cache = new Map(); // (layer, head) id -> {shares, totals}
  }

  NormContributions.prototype.allHeads = function () { return this.att.allHeads(); };
  NormContributions.prototype.ensure = function (pairs, done) { return this.att.ensure(pairs, done); };
  NormContributions.prototype.isLoaded = function (layer, head) { return this.att.isLoaded(layer, head); };

  NormContributions.prototype.decoded = function (layer, head) {
    var id = layer * this.heads + head;
    if (this.cache.has(id)) return this.cache.get(id);
    var n = this.n;
    var m = this.m;
    var weights = this.att.matrix(layer, head);
    var norms = this.norms.subarray(id * m, (id + 1) * m);
    var shares = new Float64Array(n * m);
    var totals = new Float32Array(n);
    for (var r = 0; r < n; r++) {
      var total = 0;
      for (var k = 0; k < m; k++) total += weights[r * m + k] * norms[k];
      totals[r] = total;
      for (k = 0; k < m; k++) shares[r * m + k] = total > 0 ? weights[r * m + k] * norms[k] / total : weights[r * m + k];
    }
    var out = { shares: shares, totals: totals };
    this.cache.set(id, out);
    return out;
  };

  NormContributions.prototype.matrix = function (layer, head) { return this.decoded(layer, head).shares; };
  NormContributions.prototype.rowTotals = function (layer, head) { return this.decoded(layer, head).totals; };

  /*
   * `count` signed 12-bit codes packed two in three bytes from bytes[offset] (reportgen/site/views.py
   * pack12): with u = code + 2048, the bytes are u0 & 255, (u0 >> 8) | (u1 & 15) << 4, u1 >> 4.
   */
  function unpack12(bytes, offset, count) {
    var out = new Int16Array(count);
    for (var i = 0; i < count; i += 2) {
      var at = offset + (i >> 1) * 3;
      out[i] = (bytes[at] | ((bytes[at + 1] & 15) << 8)) - 2048;
      out[i + 1] = ((bytes[at + 1] >> 4) | (bytes[at + 2] << 4)) - 2048;
    }
    return out;
  }

  function float32At(bytes, offset, count) {
    var view = new DataView(bytes.buffer, bytes.byteOffset);
    var out = new Float32Array(count);
    for (var i = 0; i < count; i++) out[i] = view.getFloat32(offset + 4 * i, true);
    return out;
  }

  // Bytes of `count` 12-bit codes packed two in three bytes (an odd count padded with one code).
  function packed12Bytes(count) {
    return 3 * Math.ceil(count / 2);
  }

  /*
   * One layer of a query/key payload (encoding "i12-vector", reportgen/site/views.py `_qk_layers`), per head:
   * {q, k: Float64Array [n * dim] = code * the vector's scale, model: Float64Array [n * n] (the model's
   * 8-bit weights), terms: per score term a Float64Array [n * n]}. Each head's block: q then k codes
   * (12-bit pairs), q scales, k scales, the weights' floor and scale (float32 [n] each) and their codes
   * (uint8 [n * n]). With `modelOf` (a payload that carries the weights once for all its views:
   * reportgen/site/views.py combined_payload) the weights are left out and modelOf(head) gives them.
   * With `terms` (how many score terms the payload names, e.g. DeBERTa's c2p and p2c) the block ends
   * with their codes and row scales (decodeTerms).
   */
  function decodeQKLayer(text, heads, n, dim, modelOf, terms) {
    var count = terms || 0;
    var bytes = base64Bytes(text);
    var base = 3 * n * dim + (modelOf ? 8 * n : 16 * n + n * n);
    var size = base + (count ? packed12Bytes(count * n * n) + 4 * count * n : 0);
    if (bytes.length !== heads * size) throw new Error('query/key data of ' + bytes.length + ' bytes, not ' + heads * size);
    var out = [];
    for (var head = 0; head < heads; head++) {
      var at = head * size;
      var codes = unpack12(bytes, at, 2 * n * dim);
      var scales = float32At(bytes, at + 3 * n * dim, modelOf ? 2 * n : 4 * n); // q, k scales[, floor, scale]
      var q = new Float64Array(n * dim);
      var k = new Float64Array(n * dim);
      for (var i = 0; i < n * dim; i++) {
        q[i] = codes[i] * scales[Math.floor(i / dim)];
        k[i] = codes[n * dim + i] * scales[n + Math.floor(i / dim)];
      }
      var model = modelOf ? modelOf(head) : decodeRows(bytes.subarray(at + 3 * n * dim + 16 * n, at + base),
        scales.subarray(2 * n, 3 * n), scales.subarray(3 * n), 0, n);
      out.push({ q: q, k: k, model: model, terms: decodeTerms(bytes, at + base, count, n) });
    }
    return out;
  }

  /*
   * A head's `count` score terms from bytes[offset] (reportgen/site/views.py `_qk_fields` "term_codes",
   * "term_scale"): their 12-bit codes in (term, query, key) order, then float32 scales in (term, query)
   * order, one per query's row; each a Float64Array [n * n] of code * its row's scale, in score units.
   */
  function decodeTerms(bytes, offset, count, n) {
    var cells = n * n;
    var codes = unpack12(bytes, offset, 2 * Math.ceil(count * cells / 2));
    var scales = float32At(bytes, offset + packed12Bytes(count * cells), count * n);
    var terms = [];
    for (var t = 0; t < count; t++) {
      var term = new Float64Array(cells);
      for (var i = 0; i < cells; i++) term[i] = codes[t * cells + i] * scales[t * n + Math.floor(i / n)];
      terms.push(term);
    }
    return terms;
  }

  /*
   * `count` bits from `bytes`, little-endian within each byte (bit b is bit b & 7 of byte b >> 3, as
   * numpy packbits(bitorder="little") writes them), as a Uint8Array of 0 and 1.
   */
  function unpackBits(bytes, count) {
    if (bytes.length < Math.ceil(count / 8)) {
      throw new Error(bytes.length + ' bytes hold fewer than ' + count + ' bits');
    }
    var out = new Uint8Array(count);
    for (var b = 0; b < count; b++) out[b] = (bytes[b >> 3] >> (b & 7)) & 1;
    return out;
  }

  /*
   * One layer's entry of a query/key payload's `visible` (reportgen/site/views.py pack_visible): which keys
   * each query sees, Uint8Array [n * n] (query-major, 1 = visible), or null when it sees every key (a
   * null entry: nothing masked in this layer); 'causal': each query sees itself and the keys before it.
   */
  function decodeVisible(text, n) {
    if (text === null || text === undefined) return null;
    if (text !== 'causal') return unpackBits(base64Bytes(text), n * n);
    var seen = new Uint8Array(n * n);
    for (var q = 0; q < n; q++) seen.fill(1, q * n, q * n + q + 1);
    return seen;
  }

  views.inflate = inflate;
  views.unpackHead = unpackHead;
  views.sizeText = sizeText;
  views.unpack12 = unpack12;
  views.decodeQKLayer = decodeQKLayer;
  views.decodeTerms = decodeTerms;
  views.unpackBits = unpackBits;
  views.decodeVisible = decodeVisible;

  // Sentence of each token for the pair filter. Special tokens join the sentence
  // before them ([CLS] and the middle [SEP] go with A, the last [SEP] with B), as in bertviz.
  function pairGroups(segments) {
    var group = 0;
    return segments.map(function (segment) {
      if (segment === 0 || segment === 1) group = segment;
      return group ? 'B' : 'A';
    });
  }

  // The cell a key moves to in a layers x heads grid (the head maps: one Tab stop, arrow keys inside):
  // [layer, head], kept inside the grid; null for a key that does not move. Home and End go to the row's ends,
  // PageUp and PageDown to the first and last layer.
  function gridStep(layer, head, key, layers, heads) {
    var moves = {
      ArrowLeft: [layer, head - 1], ArrowRight: [layer, head + 1], ArrowUp: [layer - 1, head],
      ArrowDown: [layer + 1, head], Home: [layer, 0], End: [layer, heads - 1], PageUp: [0, head],
      PageDown: [layers - 1, head],
    };
    var to = moves[key];
    if (!to) return null;
    return [Math.max(0, Math.min(layers - 1, to[0])), Math.max(0, Math.min(heads - 1, to[1]))];
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
   * Models that add to the score give `terms` (per term [n * n], decodeTerms: DeBERTa's c2p and
   * p2c, He et al. 2021; MPNet's relative position bias, Song et al. 2020) and `visible` ([n * n]
   * 0/1 or null, decodeVisible: e.g. ModernBERT's sliding window): then `termValues` holds this
   * query's row of each term, `scores` is q . k * scaling plus them, and the softmax is over the
   * visible keys only (`seen`: this query's row of `visible`, null when it sees all; `masked`: how
   * many it does not see).
   */
  function queryKeyRows(queries, keys, token, dim, scaling, terms, visible) {
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
    var termValues = (terms || []).map(function (term) { return term.slice(token * n, (token + 1) * n); });
    var scores = new Float64Array(n);
    for (k = 0; k < n; k++) {
      scores[k] = dots[k] * scaling;
      for (var t = 0; t < termValues.length; t++) scores[k] += termValues[t][k];
    }
    var seen = visible ? visible.subarray(token * n, (token + 1) * n) : null;
    var masked = 0;
    if (seen) for (k = 0; k < n; k++) masked += seen[k] ? 0 : 1;
    return {
      products: products, dots: dots, termValues: termValues, scores: scores, seen: seen, masked: masked,
      softmax: softmax(scores, 1, seen), maxAbs: maxAbs, maxProduct: maxProduct,
    };
  }

  /*
   * softmax(values * scaling), shifted by the maximum for stability; with `visible` (0/1 per value) over
   * the visible values only, the others 0, as a model's mask gives them -inf scores (none visible: all 0).
   */
  function softmax(values, scaling, visible) {
    var top = -Infinity;
    for (var k = 0; k < values.length; k++) if (!visible || visible[k]) top = Math.max(top, values[k] * scaling);
    var out = new Float64Array(values.length);
    var total = 0;
    for (k = 0; k < values.length; k++) {
      if (visible && !visible[k]) continue;
      out[k] = Math.exp(values[k] * scaling - top);
      total += out[k];
    }
    if (total > 0) for (k = 0; k < values.length; k++) out[k] /= total;
    return out;
  }

  /*
   * What the q/k page's softmax is over, e.g. "softmax(q · k × 0.2041 + c2p + p2c) over 9 of 12 keys (the
   * model masks 3 for this query)": `labels` are the score terms' column titles, `masked` how many keys
   * the model hides from this query.
   */
  function qkSoftmaxText(scaling, labels, n, masked) {
    var formula = 'q \u00b7 k \u00d7 ' + scaling.toPrecision(4) +
      labels.map(function (label) { return ' + ' + label; }).join('');
    var over = masked ? (n - masked) + ' of ' + n + ' keys (the model masks ' + masked + ' for this query)'
      : n + ' keys';
    return 'softmax(' + formula + ') over ' + over;
  }

  // ------------------------------------------------------------ deep links

  /*
   * The deep-link format, defined here once for every view (reportgen/report.py `head_link` and `model_link`
   * writes the same links from Python: keep the two in step). The first widget on a page owns the hash:
   *   #view=head&layer=2&head=0,3&token=4&filter=AB&topk=5&min=0.02
   *   #view=model&layer=2&head=5          (model view with layer 2 / head 5 enlarged)
   *   #view=qk&layer=2&head=5&token=4     (query/key page)
   *   #view=head&layer=1&head=3&token=4&mode=contributions   (contributions instead of weights)
   *   #view=head&attn=cross&layer=1&head=2   (an encoder-decoder's cross-attention; `attn` names a payload's group)
   * `heads` is read as another spelling of `head`; it is never written. `mode` is left out for weights,
   * `attn` for a payload's first group (the encoder) and wherever the payload has no groups.
   */
  var HASH_KEYS = ['view', 'layer', 'head', 'heads', 'token', 'key', 'filter', 'topk', 'min', 'mode', 'win'];
  var HASH_ORDER = ['view', 'attn', 'layer', 'head', 'token', 'key', 'filter', 'topk', 'min', 'mode', 'win'];

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

  /*
   * A long input's heatmap window (views-heatmap.js) in a link: win=Q0-Q1,K0-K1, the first and last query and key
   * token shown (inclusive, as a reader counts them). As {q0, q1, k0, k1} with q1 and k1 one past the last (what
   * the drawing loops over); null unless 0 <= first <= last < the tokens on that side.
   */
  function parseWindow(text, tokens, keys) {
    var match = /^(\d+)-(\d+),(\d+)-(\d+)$/.exec(text || '');
    if (!match) return null;
    var at = match.slice(1).map(Number);
    if (at[0] > at[1] || at[1] >= tokens || at[2] > at[3] || at[3] >= keys) return null;
    return { q0: at[0], q1: at[1] + 1, k0: at[2], k1: at[3] + 1 };
  }

  // The link text of a window (parseWindow's inverse).
  function windowText(win) {
    return win.q0 + '-' + (win.q1 - 1) + ',' + win.k0 + '-' + (win.k1 - 1);
  }

  // Distinct heads below `limit`, ascending; anything else in the list is dropped.
  function headList(text, limit) {
    return text.split(',').filter(function (part) { return /^\d+$/.test(part) && +part < limit; })
      .map(Number).filter(function (head, i, all) { return all.indexOf(head) === i; })
      .sort(function (a, b) { return a - b; });
  }

  // The parts of a head list that headList drops (not a number, or past the last head), as given.
  function badHeads(text, limit) {
    return text.split(',').filter(function (part) { return part !== '' && !(/^\d+$/.test(part) && +part < limit); });
  }

  // The fields a link gives but parseHash had to drop, each as {field, given} (the raw text, cut at 24 characters).
  function hashProblems(params, fields, headText, limits) {
    var problems = [];
    function check(name, dropped) {
      var given = params.get(name);
      if (given !== null && dropped) problems.push({ field: name, given: given.slice(0, 24) });
    }
    check('layer', fields.layer === null);
    if (headText !== null && badHeads(headText, limits.heads).length) {
      problems.push({ field: 'head', given: badHeads(headText, limits.heads).join(',').slice(0, 24) });
    }
    check('token', fields.token === null);
    check('key', fields.key === null);
    check('filter', fields.filter === null);
    check('topk', fields.topk === null && params.get('topk') !== '0');
    check('min', fields.min === null);
    check('mode', fields.mode === null);
    check('win', fields.win === null);
    if (limits.groups) check('attn', fields.attn === null);
    return problems;
  }

  /*
   * The state a hash describes, checked against limits = {layers, heads, tokens, contributions}: every field
   * is null where the link does not give it or gives a value out of range, and `problems` lists
   * those dropped values ({field, given}) so the view can say what it shows instead (hashNote).
   * `mode` is 'weights' or 'contributions'; contributions count as dropped where limits.contributions
   * is false (a page without them).
   * `head` is a single head (query/key view), `heads` the list (head and model view); `view`
   * is passed on as given, each page knowing its own views. Returns null for a hash that is not
   * ours (an ordinary heading anchor). Where limits.groups lists an encoder-decoder's groups, `attn` is
   * one of them (or null), `key` and `topk` are checked against limits.keys (the group's key tokens) and
   * `token` against limits.tokens (its query tokens); without limits.groups there is no `attn` field.
   */
  function parseHash(text, limits) {
    var raw = String(text).replace(/^#/, '');
    if (raw.indexOf('=') < 0) return null;
    var params = new URLSearchParams(raw);
    var known = limits.groups ? HASH_KEYS.concat(['attn']) : HASH_KEYS;
    if (!known.some(function (name) { return params.has(name); })) return null;
    var keys = limits.keys === undefined ? limits.tokens : limits.keys;
    var headText = params.get('head') !== null ? params.get('head') : params.get('heads');
    var filter = params.get('filter');
    var min = params.get('min') === null ? NaN : Number(params.get('min'));
    var fields = {
      view: params.get('view'),
      layer: intParam(params, 'layer', limits.layers),
      head: intParam(params, 'head', limits.heads),
      heads: headText === null ? null : headList(headText, limits.heads),
      token: intParam(params, 'token', limits.tokens),
      key: intParam(params, 'key', keys),
      filter: views.FILTERS.indexOf(filter) >= 0 ? filter : null,
      topk: intParam(params, 'topk', keys + 1) || null, // 0 is no top-k
      min: params.get('min') !== '' && isFinite(min) && min >= 0 && min <= 1 ? min : null,
      mode: modeParam(params.get('mode'), limits),
      win: parseWindow(params.get('win'), limits.tokens, keys),
    };
    if (limits.groups) fields.attn = hashGroup(raw, limits.groups);
    fields.problems = hashProblems(params, fields, headText, limits);
    return fields;
  }

  // The group a hash's `attn` names, when it is one of `names` (a payload's groups, views-core.js groupOf);
  // else null. Read before the rest of a link: the other fields are checked against that group's sizes.
  function hashGroup(text, names) {
    var given = new URLSearchParams(String(text).replace(/^#/, '')).get('attn');
    return names.indexOf(given) >= 0 ? given : null;
  }

  /*
   * What the views draw of one group of a payload: {name, queries, keys (token lists: the head view's left and
   * right columns), querySpecial, keySpecial (0/1 each), attention, contributions (encoded, or undefined), causal}.
   * An encoder-decoder's payload (reportgen/site/views.py seq2seq_groups) lists its groups in `groups`, the first
   * (the encoder) taking the payload's top-level attention and contributions; any other payload is one group
   * whose queries and keys are its tokens. `name` null or unknown: the first group.
   */
  function groupOf(data, name) {
    var list = data.groups || [];
    var group = list.filter(function (entry) { return entry.name === name; })[0] || list[0];
    if (!group) {
      return { name: null, queries: data.tokens, keys: data.tokens, querySpecial: data.special,
        keySpecial: data.special, attention: data.attention, contributions: data.contributions,
        causal: Boolean(data.causal) }; // a decoder's payload: nothing above the diagonal
    }
    var own = Boolean(group.attention);
    return { name: group.name, queries: group.queries, keys: group.keys, querySpecial: group.query_special,
      keySpecial: group.key_special, attention: own ? group.attention : data.attention,
      contributions: own ? group.contributions : data.contributions, causal: Boolean(group.causal) };
  }

  function modeParam(text, limits) {
    if (views.MODES.indexOf(text) < 0) return null;
    return text === 'contributions' && limits.contributions === false ? null : text;
  }

  var FIELD_WORDS = { filter: 'the pair filter', topk: 'top-k', min: 'a minimum weight of',
    win: 'the window of queries and keys' };

  // "layers 0–5", or "only layer 0" where there is one.
  function spanText(noun, count) {
    return count > 1 ? noun + 's 0\u2013' + (count - 1) : 'only ' + noun + ' 0';
  }

  // The heads a view shows, in words.
  function headsText(heads, total) {
    if (heads.length === total) return 'all heads';
    if (heads.length === 0) return 'no head';
    return (heads.length === 1 ? 'head ' : 'heads ') + heads.join(', ');
  }

  /*
   * One short note on what a link asked for that the view cannot show, and what it shows instead:
   * problems from parseHash (plus {field: 'view'} where the page has no such view), limits as for
   * parseHash, shown = the state drawn ({view: its name in words, layer, heads}).
   */
  function hashNote(problems, limits, shown) {
    return problems.map(function (problem) {
      var asked = 'The link asked for ';
      var given = /^\d+$/.test(problem.given) ? problem.given : '\u201c' + problem.given + '\u201d';
      switch (problem.field) {
        case 'view':
          return asked + 'the ' + given + ' view; showing the ' + shown.view + '.';
        case 'layer':
          return asked + 'layer ' + given + '; this model has ' + spanText('layer', limits.layers) +
            '. Showing layer ' + shown.layer + '.';
        case 'head':
          return asked + 'head ' + given + '; this model has ' + spanText('head', limits.heads) +
            '. Showing ' + headsText(shown.heads, limits.heads) + '.';
        case 'attn':
          return asked + 'the ' + given + ' attention; this model has ' + limits.groups.join(', ') +
            '. Showing the ' + shown.attn + '.';
        case 'mode':
          return problem.given === 'contributions'
            ? asked + 'contributions; this page has attention weights only. Showing weights.'
            : asked + 'the mode ' + given + '; the views show weights or contributions. Showing ' +
              (shown.mode || 'weights') + '.';
        case 'token':
        case 'key':
          return asked + (problem.field === 'key' ? 'key token ' : 'token ') + given +
            '; this example has ' + spanText('token', limits.tokens) + '. No token pinned.';
        default:
          return asked + (FIELD_WORDS[problem.field] || problem.field) + ' ' + given +
            ', which is not a value it can take; left at its default.';
      }
    }).join(' ');
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

  // How long "Link copied" and the copied link stay on screen once the clipboard has the link (ms).
  // A property of the views object, read at each copy, so a test can shorten it.
  var COPY_SHOWN_MS = 6000;
  // The event a widget fires on its root after each render (views-widget.js, views-qk.js): an open link box
  // rewrites its address then, so it never shows the link of a view the reader has left (issue 28).
  var RENDERED = 'rgv-rendered';

  // Tells the page's copy controls that a widget's state may have changed.
  function announceRender(root) {
    var event;
    if (typeof CustomEvent === 'function') event = new CustomEvent(RENDERED, { bubbles: true });
    else { event = document.createEvent('Event'); event.initEvent(RENDERED, true, false); }
    root.dispatchEvent(event);
  }

  // A view's "copy link" control: clipboard when allowed, otherwise a selected text box. The box and
  // its note go away on their own: COPY_SHOWN_MS after a copy that worked, and as soon as the reader
  // leaves the box where they had to copy by hand; while shown, the box follows the view's state.
  function copyControl(getHash) {
    var wrap = el('span', 'rgv-copy-wrap');
    var trigger = button('rgv-copy', 'Copy link', 'Copy a link to exactly this view');
    var box = el('input', 'rgv-link');
    box.readOnly = true;
    box.hidden = true;
    box.setAttribute('aria-label', 'link to this view');
    var note = el('span', 'rgv-copy-note');
    note.setAttribute('role', 'status');
    var timer = null;
    function hide() {
      clearTimeout(timer);
      box.hidden = true;
      note.textContent = '';
    }
    trigger.addEventListener('click', function () {
      var link = linkTo(getHash());
      clearTimeout(timer);
      box.value = link;
      box.hidden = false;
      copyLink(link, function () {
        note.textContent = 'Link copied';
        timer = setTimeout(hide, views.COPY_SHOWN_MS);
      }, function () {
        box.focus(); // its blur then says when the reader is done with it
        box.select();
        note.textContent = 'Select the link and copy it';
      });
    });
    box.addEventListener('blur', function () {
      if (note.textContent !== 'Link copied') hide(); // copied by hand, or given up: done with the box
    });
    document.addEventListener(RENDERED, function () {
      if (!box.hidden) box.value = linkTo(getHash());
    });
    wrap.appendChild(trigger);
    wrap.appendChild(box);
    wrap.appendChild(note);
    return wrap;
  }

  // ---------------------------------------------------------------- export

  var exported = {
    el: el, group: group, svgEl: svgEl, range: range, button: button, labelled: labelled, selectOf: selectOf,
    numberedSelect: numberedSelect, stateSelect: stateSelect, HEAD_COLOURS: HEAD_COLOURS, HEAD_TINT: HEAD_TINT, headColour: headColour,
    relativeLuminance: relativeLuminance, markFirstRender: markFirstRender,
    base64Bytes: base64Bytes, base64Float32: base64Float32, decodeRows: decodeRows, Attention: Attention, MatrixSource: MatrixSource,
    NormContributions: NormContributions,
    gridStep: gridStep, pairGroups: pairGroups, pickKeys: pickKeys, queryKeyRows: queryKeyRows, softmax: softmax,
    qkSoftmaxText: qkSoftmaxText,
    formatHash: formatHash, parseHash: parseHash, parseWindow: parseWindow, windowText: windowText, hashGroup: hashGroup, groupOf: groupOf, hashNote: hashNote, headsText: headsText, readHash: readHash,
    writeHash: writeHash,
    linkTo: linkTo, copyLink: copyLink, copyControl: copyControl, COPY_SHOWN_MS: COPY_SHOWN_MS,
    announceRender: announceRender,
  };
  Object.keys(exported).forEach(function (name) { views[name] = exported[name]; });

  if (typeof window !== 'undefined') window.reportgenViews = views;
  if (typeof module !== 'undefined' && module.exports) module.exports = views;
})();
