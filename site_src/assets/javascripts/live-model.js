/*
 * reportgen live model: a BERT-family encoder's forward pass in the browser (views.live), giving every head's
 * attention and the value norms ||f(x_j)|| of its contributions (Kobayashi, Kuribayashi, Yokoi and Inui 2020,
 * "Attention is Not Only a Weight"; reportgen/model/value_norms.py).
 *
 * Written for reportgen (no third-party code). Everything lives inside the one function reportgenLiveModel,
 * which uses no outer variable: a page opened from file:// cannot start a Web Worker from a file, so it starts
 * one from a Blob of '(' + reportgenLiveModel.toString() + ')(self);' plus its own message glue.
 *
 * The weights come from reportgen/model/live_weights.py `export_weights`: a JSON spec (architecture fields and
 * a table of tensors: name, shape, encoding, offset, length) and the bytes of all tensors. Encodings:
 *   f32   float32 little-endian, row-major
 *   f16   float16 (IEEE 754 half precision) little-endian, row-major
 *   q<b>  (b = 2..8) per-row symmetric quantization of a [R, C] matrix: R float32 row scales s_r, then the
 *         codes as one little-endian bit stream of b bits each (code i at stream bits [i*b, i*b + b), stream
 *         bit k = bit k % 8 of byte k >> 3); w = (code - m) * s_r with m = 2^(b-1) - 1. An entry with
 *         "column_scales": true carries C float32 column scales g_c before the row scales: w = (code - m) * s_r * g_c.
 * Layer matrices are dequantized once into Float32Arrays; the embedding tables stay quantized and only the rows
 * a sentence uses are decoded.
 *
 * API (root.reportgenLiveModelApi; module.exports under Node, for tests/js/live-model.test.js):
 *   decodeWeights(spec, bytes)       -> model
 *   forward(model, ids, segments)    -> {attention: Float32Array [L*H*T*T] (layer, head, query, key),
 *                                        norms: Float32Array [L*H*T] (layer, head, key)}
 *   erf, gelu, geluTanh, softmaxRows, layerNorm, linear, unpackCodes: the parts, for the tests.
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

  // y [rows, out] = x [rows, inp] W^T + b for a torch Linear weight W [out, inp]: the inner loop runs over a
  // contiguous row of W and of x; each row of W is read once and used for every token while it is in cache, and
  // four partial sums keep the additions independent.
  function linear(x, rows, inp, weight, bias, out) {
    var y = new Float32Array(rows * out);
    var tail = inp - (inp % 4);
    for (var o = 0; o < out; o++) {
      var ws = o * inp;
      var b = bias ? bias[o] : 0;
      for (var t = 0; t < rows; t++) {
        var xs = t * inp;
        var s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        var i = 0;
        for (; i < tail; i += 4) {
          s0 += x[xs + i] * weight[ws + i];
          s1 += x[xs + i + 1] * weight[ws + i + 1];
          s2 += x[xs + i + 2] * weight[ws + i + 2];
          s3 += x[xs + i + 3] * weight[ws + i + 3];
        }
        for (; i < inp; i++) s0 += x[xs + i] * weight[ws + i];
        y[t * out + o] = b + ((s0 + s1) + (s2 + s3));
      }
    }
    return y;
  }

  // `count` codes of `bits` bits from the little-endian bit stream at bytes[byteStart...], starting at code
  // index `first`, into out[outOffset...].
  function unpackCodes(bytes, byteStart, first, count, bits, out, outOffset) {
    var mask = (1 << bits) - 1;
    var bit = first * bits;
    var at = outOffset || 0;
    var end = bytes.length;
    for (var k = 0; k < count; k++, bit += bits) {
      var index = byteStart + (bit >> 3);
      var shift = bit & 7;
      var word = bytes[index];
      if (shift + bits > 8 && index + 1 < end) word |= bytes[index + 1] << 8;
      out[at + k] = (word >> shift) & mask;
    }
    return out;
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
    var match = /^q([2-8])$/.exec(entry.encoding);
    if (!match || shape.length !== 2) throw new Error('live model: unknown encoding ' + entry.encoding + ' of ' + entry.name);
    var bits = +match[1];
    var middle = (1 << (bits - 1)) - 1;
    var columns = null;
    if (entry.column_scales) {
      columns = readFloats(bytes, start, cols);
      start += 4 * cols;
    }
    var scales = readFloats(bytes, start, rows);
    var codeStart = start + 4 * rows;
    var codes = new Uint8Array(cols);
    function addRow(r, dst, at) {
      unpackCodes(bytes, codeStart, r * cols, cols, bits, codes, 0);
      var s = scales[r];
      for (var c = 0; c < cols; c++) dst[at + c] += (codes[c] - middle) * s * (columns ? columns[c] : 1);
    }
    return {
      rows: rows, cols: cols, addRow: addRow,
      all: function () {
        var out = new Float32Array(rows * cols);
        var allCodes = unpackCodes(bytes, codeStart, 0, rows * cols, bits, new Uint8Array(rows * cols), 0);
        for (var r = 0; r < rows; r++) {
          var s = scales[r];
          for (var c = 0; c < cols; c++) {
            var i = r * cols + c;
            out[i] = (allCodes[i] - middle) * s * (columns ? columns[c] : 1);
          }
        }
        return out;
      }
    };
  }

  var LAYER_PARTS = ['query', 'key', 'value', 'output', 'attention_norm', 'intermediate', 'ffn_output', 'output_norm'];

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
      for (var p = 0; p < LAYER_PARTS.length; p++) {
        var prefix = 'layers.' + l + '.' + LAYER_PARTS[p];
        layer[LAYER_PARTS[p]] = { weight: need(prefix + '.weight').all(), bias: need(prefix + '.bias').all() };
      }
      model.layers.push(layer);
    }
    return model;
  }

  function forward(model, ids, segments) {
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
    var row = new Float64Array(T);
    var f = new Float64Array(D);
    for (var l = 0; l < L; l++) {
      var layer = model.layers[l];
      var q = linear(x, T, D, layer.query.weight, layer.query.bias, D);
      var k = linear(x, T, D, layer.key.weight, layer.key.bias, D);
      var v = linear(x, T, D, layer.value.weight, layer.value.bias, D);
      var wo = layer.output.weight;
      var context = new Float32Array(T * D);
      for (var h = 0; h < H; h++) {
        var off = h * hd;
        var base = (l * H + h) * T * T;
        for (var i = 0; i < T; i++) {
          var top = -Infinity;
          for (var j = 0; j < T; j++) {
            var s = 0;
            for (var d = 0; d < hd; d++) s += q[i * D + off + d] * k[j * D + off + d];
            s *= scaling;
            row[j] = s;
            if (s > top) top = s;
          }
          var total = 0;
          for (j = 0; j < T; j++) {
            row[j] = Math.exp(row[j] - top);
            total += row[j];
          }
          for (j = 0; j < T; j++) {
            var p = row[j] / total;
            attention[base + i * T + j] = p;
            for (d = 0; d < hd; d++) context[i * D + off + d] += p * v[j * D + off + d];
          }
        }
        // ||f(x_j)||: the head's value vector of key j through its slice of the output projection (no bias).
        for (j = 0; j < T; j++) {
          var sq = 0;
          for (var o = 0; o < D; o++) {
            var sum = 0;
            for (d = 0; d < hd; d++) sum += v[j * D + off + d] * wo[o * D + off + d];
            sq += sum * sum;
          }
          norms[(l * H + h) * T + j] = Math.sqrt(sq);
        }
      }
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
    return { attention: attention, norms: norms, hidden: x };
  }

  api.erf = erf;
  api.readHalfs = readHalfs;
  api.gelu = gelu;
  api.geluTanh = geluTanh;
  api.softmaxRows = softmaxRows;
  api.layerNorm = layerNorm;
  api.linear = linear;
  api.unpackCodes = unpackCodes;
  api.decodeWeights = decodeWeights;
  api.forward = forward;
  root.reportgenLiveModelApi = api;
  return api;
}

if (typeof module !== 'undefined' && module.exports) module.exports = reportgenLiveModel({});
else reportgenLiveModel(typeof self !== 'undefined' ? self : this);
