/*
 * reportgen live model: a BERT-family encoder's forward pass in the browser (views.live), giving every head's
 * attention and the value norms ||f(x_j)|| of its contributions (Kobayashi, Kuribayashi, Yokoi and Inui 2020,
 * "Attention is Not Only a Weight"; reportgen/model/value_norms.py).
 *
 * Written for reportgen (no third-party code). Everything lives inside the one function reportgenLiveModel,
 * which uses no outer variable: a page opened from file:// cannot start a Web Worker from a file, so it starts
 * one from a Blob of '(' + reportgenLiveModel.toString() + ')(self);' plus its own message glue.
 *
 * The weights come from reportgen/live/weights.py `export_weights`: a JSON spec (architecture fields and
 * a table of tensors: name, shape, encoding, offset, length) and the bytes of all tensors. Encodings:
 *   f32   float32 little-endian, row-major
 *   f16   float16 (IEEE 754 half precision) little-endian, row-major
 *   rice  a [R, C] matrix on a grid per row: R float32 row steps s_r, then the integer codes q of each row
 *         with step s_r > 0, Golomb-Rice coded with parameter 2^rice_bits (riceRows); w = q * s_r.
 * Layer matrices are decoded once into Float32Arrays; the embedding tables stay as int16 codes and only the rows
 * a sentence uses are scaled.
 *
 * API (root.reportgenLiveModelApi; module.exports under Node, for tests/js/live-model.test.js):
 *   decodeWeights(spec, bytes)       -> model
 *   forward(model, ids, segments[, onLayer(done, total)])
 *                                     -> {attention: Float32Array [L*H*T*T] (layer, head, query, key),
 *                                        norms: Float32Array [L*H*T] (layer, head, key)}
 *   erf, gelu, geluTanh, softmaxRows, layerNorm, linear, riceRows, textToBytes: the parts, for the tests.
 */
function reportgenLiveModel(root) {
  'use strict';

  var api = {};

  // erf from the complementary error function's Chebyshev-fitted form in Press, Teukolsky, Vetterling and
  // Flannery, Numerical Recipes (2nd ed., section 6.2, erfcc): erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2),
  // fractional error below 1.2e-7 for every z >= 0; erf(-x) = -erf(x).
  function erf(x) {
    var z = Math.abs(x);
    var t = 1 / (1 + 0.5 * z);
    var poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 +
      t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
    var r = 1 - t * Math.exp(-z * z + poly);
    return x >= 0 ? r : -r;
  }

  var SQRT1_2 = Math.SQRT1_2;
  var SQRT_2_OVER_PI = Math.sqrt(2 / Math.PI);

  // GELU, x * Phi(x) (Hendrycks and Gimpel 2016): the exact (erf) form, torch's nn.functional.gelu.
  function gelu(x) {
    return 0.5 * x * (1 + erf(x * SQRT1_2));
  }

  // The tanh approximation of GELU (transformers' gelu_new and gelu_pytorch_tanh compute this formula).
  function geluTanh(x) {
    return 0.5 * x * (1 + Math.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)));
  }

  // Softmax of each of `rows` rows of `cols` values in buf (from `offset`), in place, with the row's maximum
  // subtracted first so exp never overflows.
  function softmaxRows(buf, rows, cols, offset) {
    var base = offset || 0;
    for (var r = 0; r < rows; r++) {
      var start = base + r * cols;
      var top = -Infinity;
      for (var c = 0; c < cols; c++) if (buf[start + c] > top) top = buf[start + c];
      var total = 0;
      for (c = 0; c < cols; c++) {
        var e = Math.exp(buf[start + c] - top);
        buf[start + c] = e;
        total += e;
      }
      for (c = 0; c < cols; c++) buf[start + c] /= total;
    }
    return buf;
  }

  // LayerNorm over each row of x [rows, width], in place (biased variance, as torch).
  function layerNorm(x, rows, width, gamma, beta, eps) {
    for (var r = 0; r < rows; r++) {
      var start = r * width;
      var mean = 0;
      for (var i = 0; i < width; i++) mean += x[start + i];
      mean /= width;
      var variance = 0;
      for (i = 0; i < width; i++) {
        var d = x[start + i] - mean;
        variance += d * d;
      }
      var inv = 1 / Math.sqrt(variance / width + eps);
      for (i = 0; i < width; i++) x[start + i] = (x[start + i] - mean) * inv * gamma[i] + beta[i];
    }
    return x;
  }

  // y [rows, out] = x [rows, inp] W^T + b for a torch Linear weight W [out, inp]: four tokens by two outputs at a
  // time, so that each value loaded serves two or four of the eight sums (the loads, not the multiplications, bound
  // a JavaScript loop; 2.3 times the speed of one sum per token and output). The sums are doubles, rounded once.
  function linear(x, rows, inp, weight, bias, out) {
    var y = new Float32Array(rows * out);
    var t = 0;
    for (; t + 4 <= rows; t += 4) {
      var o = 0;
      for (; o + 2 <= out; o += 2) linearBlock(x, t, inp, weight, bias, o, y, out);
      if (o < out) for (var r = t; r < t + 4; r++) linearOne(x, r, inp, weight, bias, o, y, out);
    }
    for (; t < rows; t++) for (o = 0; o < out; o++) linearOne(x, t, inp, weight, bias, o, y, out);
    return y;
  }

  // Tokens t .. t + 3, outputs o and o + 1 of linear.
  function linearBlock(x, t, inp, weight, bias, o, y, out) {
    var x0 = t * inp, x1 = x0 + inp, x2 = x1 + inp, x3 = x2 + inp, w0 = o * inp, w1 = w0 + inp;
    var a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
    for (var i = 0; i < inp; i++) {
      var u = weight[w0 + i], v = weight[w1 + i];
      var p = x[x0 + i], q = x[x1 + i], r = x[x2 + i], s = x[x3 + i];
      a0 += p * u; a1 += q * u; a2 += r * u; a3 += s * u;
      b0 += p * v; b1 += q * v; b2 += r * v; b3 += s * v;
    }
    var c = bias ? bias[o] : 0, d = bias ? bias[o + 1] : 0;
    y[t * out + o] = c + a0; y[(t + 1) * out + o] = c + a1; y[(t + 2) * out + o] = c + a2; y[(t + 3) * out + o] = c + a3;
    y[t * out + o + 1] = d + b0; y[(t + 1) * out + o + 1] = d + b1; y[(t + 2) * out + o + 1] = d + b2;
    y[(t + 3) * out + o + 1] = d + b3;
  }

  // Token t, output o of linear (the rows and outputs left over by linearBlock).
  function linearOne(x, t, inp, weight, bias, o, y, out) {
    var xs = t * inp, ws = o * inp, sum = 0;
    for (var i = 0; i < inp; i++) sum += x[xs + i] * weight[ws + i];
    y[t * out + o] = (bias ? bias[o] : 0) + sum;
  }

  // One head's slice [T, hd] of a projection [T, D] (columns off .. off + hd), copied into a contiguous array.
  function headSlice(m, T, D, off, hd) {
    var out = new Float32Array(T * hd);
    for (var t = 0; t < T; t++) for (var d = 0; d < hd; d++) out[t * hd + d] = m[t * D + off + d];
    return out;
  }

  // G = W_h^T W_h [hd, hd] (doubles) for the head's columns off .. off + hd of the output projection W [D, D]:
  // ||W_h v||^2 = v^T G v, so a value vector's norm through the projection costs hd^2, not D * hd.
  function headGram(wo, D, off, hd) {
    var gram = new Float64Array(hd * hd);
    for (var o = 0; o < D; o++) {
      var ws = o * D + off;
      for (var a = 0; a < hd; a++) {
        var wa = wo[ws + a];
        for (var b = a; b < hd; b++) gram[a * hd + b] += wa * wo[ws + b];
      }
    }
    for (a = 0; a < hd; a++) for (b = 0; b < a; b++) gram[a * hd + b] = gram[b * hd + a];
    return gram;
  }

  // One head: its attention rows into attention[base ...] (softmax of q.k * scaling over the keys), its weighted
  // values into context[.., off .. off + hd] (when context is given), and ||f(x_j)|| into norms[at + j]. Keys go
  // four at a time, as in linear: each query value loaded serves four dot products, each sum of the context four
  // value rows.
  function attendHead(q, k, v, T, hd, scaling, attention, base, context, D, off, gram, norms, at) {
    var row = new Float64Array(T + 3);  // room for a last block of four keys
    var acc = new Float64Array(hd);
    var whole = T - (T % 4);
    for (var i = 0; i < T; i++) {
      var qs = i * hd, j = 0, d = 0;
      for (; j < whole; j += 4) {
        var k0 = j * hd, k1 = k0 + hd, k2 = k1 + hd, k3 = k2 + hd, s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (d = 0; d < hd; d++) {
          var e = q[qs + d];
          s0 += e * k[k0 + d]; s1 += e * k[k1 + d]; s2 += e * k[k2 + d]; s3 += e * k[k3 + d];
        }
        row[j] = s0 * scaling; row[j + 1] = s1 * scaling; row[j + 2] = s2 * scaling; row[j + 3] = s3 * scaling;
      }
      for (; j < T; j++) {
        var ks = j * hd, s = 0;
        for (d = 0; d < hd; d++) s += q[qs + d] * k[ks + d];
        row[j] = s * scaling;
      }
      var top = -Infinity;
      for (j = 0; j < T; j++) if (row[j] > top) top = row[j];
      var total = 0;
      for (j = 0; j < T; j++) {
        row[j] = Math.exp(row[j] - top);
        total += row[j];
      }
      for (j = 0; j < T; j++) {
        row[j] /= total;
        attention[base + i * T + j] = row[j];
      }
      if (!context) continue;
      acc.fill(0);
      for (j = 0; j < whole; j += 4) {
        var v0 = j * hd, v1 = v0 + hd, v2 = v1 + hd, v3 = v2 + hd;
        var p0 = row[j], p1 = row[j + 1], p2 = row[j + 2], p3 = row[j + 3];
        for (d = 0; d < hd; d++) acc[d] += p0 * v[v0 + d] + p1 * v[v1 + d] + p2 * v[v2 + d] + p3 * v[v3 + d];
      }
      for (; j < T; j++) for (d = 0; d < hd; d++) acc[d] += row[j] * v[j * hd + d];
      for (d = 0; d < hd; d++) context[i * D + off + d] = acc[d];
    }
    for (j = 0; j < T; j++) {
      var vs = j * hd, sq = 0;
      for (var a = 0; a < hd; a++) {
        var ga = a * hd, inner = 0;
        for (var b = 0; b < hd; b++) inner += gram[ga + b] * v[vs + b];
        sq += v[vs + a] * inner;
      }
      norms[at + j] = Math.sqrt(Math.max(sq, 0));
    }
  }

  // Golomb-Rice codes (reportgen/live/weights.py rice_rows) of `rows` rows of `cols` codes from
  // bytes[start...] into out (Int16Array [rows * cols], zeros where steps[r] is 0: such rows store nothing). Each
  // code: u >> k one-bits, a zero-bit, the k low bits of u (least significant first); u = 2q or -2q - 1. Bits are
  // read least significant first from each byte; every row starts on a byte boundary. Returns the end offset.
  function riceRows(bytes, start, rows, cols, k, steps, out) {
    var at = start;
    var mask = (1 << k) - 1;
    for (var r = 0; r < rows; r++) {
      if (steps[r] === 0) continue;
      var acc = 0, have = 0; // the next `have` bits of the stream, least significant first (have <= 31)
      for (var i = r * cols, end = i + cols; i < end; i++) {
        var high = 0;
        for (;;) { // count one-bits up to the zero-bit
          while (have <= 23) { acc = (acc | bytes[at++] << have) >>> 0; have += 8; }
          var zeros = ~acc & (0xffffffff >>> (32 - have));
          if (zeros === 0) { high += have; acc = 0; have = 0; continue; }
          var ones = 31 - Math.clz32(zeros & -zeros);
          high += ones;
          acc >>>= ones + 1;
          have -= ones + 1;
          break;
        }
        if (have < k) while (have <= 23) { acc = (acc | bytes[at++] << have) >>> 0; have += 8; }
        var u = high * (mask + 1) + (acc & mask);
        acc >>>= k;
        have -= k;
        out[i] = u & 1 ? -(u + 1) / 2 : u / 2;
      }
      at -= have >> 3; // whole bytes read ahead belong to the next row
    }
    return at;
  }

  // The text of a weights file (reportgen/site/live_page.py pack_text): every three characters are the digits
  // d0, d1, d2 of a 47-bit value d0 + RADIX * (d1 + RADIX * d2) (exact in a double: below 2^53), each digit a
  // character of live_page.DIGIT_RANGES; the value's bits, least significant first, are the bytes'. `count` bytes
  // go to out[offset...]; returns how many did.
  var RADIX = 52016;
  var DIGITS = null; // character code -> digit, built on first use

  function textToBytes(text, out, offset, count) {
    if (!DIGITS) {
      DIGITS = new Uint16Array(65536);
      for (var c = 0x1000; c < 0x2028; c++) DIGITS[c] = c - 0x1000;
      for (c = 0x202a; c < 0xd800; c++) DIGITS[c] = c - 0x202a + 4136;
      for (c = 0xe000; c < 0xfdd0; c++) DIGITS[c] = c - 0xe000 + 51198; // 4136 + 47062 digits before
    }
    var acc = 0, have = 0, at = offset, end = offset + count;
    for (var i = 0; i + 2 < text.length && at < end; i += 3) {
      var value = DIGITS[text.charCodeAt(i)] + RADIX * (DIGITS[text.charCodeAt(i + 1)] +
        RADIX * DIGITS[text.charCodeAt(i + 2)]);
      var low = value >>> 0; // value mod 2^32 (value < 2^47)
      var high = (value - low) / 4294967296;
      // 47 bits after the `have` (< 8) waiting: the low 32 in two halves, then the high 15
      acc |= (low & 0xffff) << have;
      have += 16;
      while (have >= 8 && at < end) { out[at++] = acc & 255; acc >>>= 8; have -= 8; }
      acc |= (low >>> 16) << have;
      have += 16;
      while (have >= 8 && at < end) { out[at++] = acc & 255; acc >>>= 8; have -= 8; }
      acc |= high << have;
      have += 15;
      while (have >= 8 && at < end) { out[at++] = acc & 255; acc >>>= 8; have -= 8; }
    }
    return at - offset;
  }

  function readFloats(bytes, start, count) {
    var view = new DataView(bytes.buffer, bytes.byteOffset + start, count * 4);
    var out = new Float32Array(count);
    for (var i = 0; i < count; i++) out[i] = view.getFloat32(i * 4, true);
    return out;
  }

  // IEEE 754 half-precision values (little-endian) as float32: sign, 5 exponent bits (bias 15), 10 fraction bits;
  // exponent 0 is subnormal (fraction * 2^-24), exponent 31 infinity or NaN.
  function readHalfs(bytes, start, count) {
    var view = new DataView(bytes.buffer, bytes.byteOffset + start, count * 2);
    var out = new Float32Array(count);
    for (var i = 0; i < count; i++) {
      var bits = view.getUint16(i * 2, true);
      var sign = bits & 0x8000 ? -1 : 1;
      var exponent = (bits >> 10) & 31;
      var fraction = bits & 1023;
      if (exponent === 0) out[i] = sign * fraction * Math.pow(2, -24);
      else if (exponent === 31) out[i] = fraction ? NaN : sign * Infinity;
      else out[i] = sign * (1 + fraction / 1024) * Math.pow(2, exponent - 15);
    }
    return out;
  }

  // One tensor of the spec, as a reader of rows: row(r, dst, dstOffset) adds row r into dst.
  function tensorReader(entry, bytes) {
    var shape = entry.shape;
    var rows = shape.length === 2 ? shape[0] : 1;
    var cols = shape.length === 2 ? shape[1] : shape[0];
    var start = entry.offset;
    if (entry.encoding === 'f32' || entry.encoding === 'f16') {
      var values = (entry.encoding === 'f32' ? readFloats : readHalfs)(bytes, start, rows * cols);
      return {
        rows: rows, cols: cols, all: function () { return values; },
        addRow: function (r, dst, at) { for (var c = 0; c < cols; c++) dst[at + c] += values[r * cols + c]; }
      };
    }
    if (entry.encoding !== 'rice' || shape.length !== 2) {
      throw new Error('live model: unknown encoding ' + entry.encoding + ' of ' + entry.name);
    }
    var steps = readFloats(bytes, start, rows);
    var codes = new Int16Array(rows * cols);
    riceRows(bytes, start + 4 * rows, rows, cols, entry.rice_bits, steps, codes);
    return {
      rows: rows, cols: cols,
      addRow: function (r, dst, at) {
        var s = steps[r];
        for (var c = 0, i = r * cols; c < cols; c++, i++) dst[at + c] += codes[i] * s;
      },
      all: function () {
        var out = new Float32Array(rows * cols);
        for (var r = 0, i = 0; r < rows; r++) {
          var s = steps[r];
          for (var c = 0; c < cols; c++, i++) out[i] = codes[i] * s;
        }
        return out;
      }
    };
  }

  var LAYER_PARTS = ['query', 'key', 'value', 'output', 'attention_norm', 'intermediate', 'ffn_output', 'output_norm'];
  var ATTENTION_PARTS = LAYER_PARTS.slice(0, 4);  // all the last layer has: nothing shown depends on the rest

  function decodeWeights(spec, bytes) {
    if (!(bytes instanceof Uint8Array)) bytes = new Uint8Array(bytes);
    var readers = {};
    for (var i = 0; i < spec.tensors.length; i++) readers[spec.tensors[i].name] = tensorReader(spec.tensors[i], bytes);
    function need(name) {
      if (!readers[name]) throw new Error('live model: the weights lack ' + name);
      return readers[name];
    }
    var model = {
      spec: spec, layers: [],
      word: need('embeddings.word'), position: need('embeddings.position'),
      tokenType: spec.type_vocab > 0 ? need('embeddings.token_type') : null,
      embNormWeight: need('embeddings.norm.weight').all(), embNormBias: need('embeddings.norm.bias').all(),
      projectWeight: null, projectBias: null
    };
    if (spec.embedding_projection) {
      model.projectWeight = need('embeddings.project.weight').all();
      model.projectBias = need('embeddings.project.bias').all();
    }
    for (var l = 0; l < spec.layers; l++) {
      var layer = {};
      var parts = l < spec.layers - 1 ? LAYER_PARTS : ATTENTION_PARTS;
      for (var p = 0; p < parts.length; p++) {
        var prefix = 'layers.' + l + '.' + parts[p];
        layer[parts[p]] = { weight: need(prefix + '.weight').all(), bias: need(prefix + '.bias').all() };
      }
      model.layers.push(layer);
    }
    return model;
  }

  function forward(model, ids, segments, onLayer) {
    var spec = model.spec;
    var T = ids.length;
    var E = spec.embedding, D = spec.hidden, H = spec.heads, F = spec.intermediate, L = spec.layers;
    var hd = D / H;
    var eps = spec.layer_norm_eps;
    var act = spec.activation === 'gelu_tanh' ? geluTanh : gelu;
    if (T > spec.max_positions) throw new Error('live model: ' + T + ' tokens, the model takes ' + spec.max_positions);
    var x = new Float32Array(T * E);
    for (var t = 0; t < T; t++) {
      if (ids[t] < 0 || ids[t] >= spec.vocab) throw new Error('live model: token id ' + ids[t] + ' out of range');
      model.word.addRow(ids[t], x, t * E);
      model.position.addRow(t, x, t * E);
      if (model.tokenType) model.tokenType.addRow(segments && segments[t] ? segments[t] : 0, x, t * E);
    }
    layerNorm(x, T, E, model.embNormWeight, model.embNormBias, eps);
    if (model.projectWeight) x = linear(x, T, E, model.projectWeight, model.projectBias, D);
    var attention = new Float32Array(L * H * T * T);
    var norms = new Float32Array(L * H * T);
    var scaling = 1 / Math.sqrt(hd);
    for (var l = 0; l < L; l++) {
      var layer = model.layers[l];
      var q = linear(x, T, D, layer.query.weight, layer.query.bias, D);
      var k = linear(x, T, D, layer.key.weight, layer.key.bias, D);
      var v = linear(x, T, D, layer.value.weight, layer.value.bias, D);
      var wo = layer.output.weight;
      var last = l === L - 1;  // its attention output feeds nothing shown: no context vectors
      var context = last ? null : new Float32Array(T * D);
      // the heads' Gram matrices depend on the weights alone: made at the first forward, kept for the next sentences
      var grams = layer.grams || (layer.grams = []);
      for (var h = 0; h < H; h++) {
        var off = h * hd;
        var gram = grams[h] || (grams[h] = headGram(wo, D, off, hd));
        attendHead(headSlice(q, T, D, off, hd), headSlice(k, T, D, off, hd), headSlice(v, T, D, off, hd), T, hd,
                   scaling, attention, (l * H + h) * T * T, context, D, off, gram, norms, (l * H + h) * T);
      }
      if (onLayer) onLayer(l + 1, L); // the page's progress: a layer's attention and norms are in
      if (last) break;  // the last layer's feed-forward block changes neither the attention nor the norms
      var a = linear(context, T, D, wo, layer.output.bias, D);
      for (var n = 0; n < T * D; n++) a[n] += x[n];
      layerNorm(a, T, D, layer.attention_norm.weight, layer.attention_norm.bias, eps);
      var inter = linear(a, T, D, layer.intermediate.weight, layer.intermediate.bias, F);
      for (n = 0; n < T * F; n++) inter[n] = act(inter[n]);
      var out = linear(inter, T, F, layer.ffn_output.weight, layer.ffn_output.bias, D);
      for (n = 0; n < T * D; n++) out[n] += a[n];
      layerNorm(out, T, D, layer.output_norm.weight, layer.output_norm.bias, eps);
      x = out;
    }
    return { attention: attention, norms: norms };
  }

  api.erf = erf;
  api.readHalfs = readHalfs;
  api.gelu = gelu;
  api.geluTanh = geluTanh;
  api.softmaxRows = softmaxRows;
  api.layerNorm = layerNorm;
  api.linear = linear;
  api.riceRows = riceRows;
  api.textToBytes = textToBytes;
  api.decodeWeights = decodeWeights;
  api.forward = forward;
  root.reportgenLiveModelApi = api;
  return api;
}

if (typeof module !== 'undefined' && module.exports) module.exports = reportgenLiveModel({});
else reportgenLiveModel(typeof self !== 'undefined' ? self : this);
