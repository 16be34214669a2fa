// The live model's arithmetic (site_src/assets/javascripts/live-model.js): erf and GELU, softmax, a one-layer
// hand-made model's attention and value norms, the Rice-coded weights and the 15-bit text they travel in.
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');

const live = require(path.join(__dirname, '..', '..', 'site_src', 'assets', 'javascripts', 'live-model.js'));

function close(actual, expected, tolerance, what) {
  assert.ok(Math.abs(actual - expected) <= tolerance, `${what}: ${actual} is not within ${tolerance} of ${expected}`);
}

test('erf matches known values to 2e-7', () => {
  const known = [[0, 0], [0.1, 0.1124629160182849], [0.5, 0.5204998778130465], [1, 0.8427007929497149],
    [1.5, 0.9661051464753108], [2, 0.9953222650189527], [3, 0.9999779095030014], [6, 1]];
  for (const [x, value] of known) {
    close(live.erf(x), value, 2e-7, `erf(${x})`);
    close(live.erf(-x), -value, 2e-7, `erf(${-x})`);
  }
});

test('GELU, exact and tanh forms', () => {
  close(live.gelu(0), 0, 1e-12, 'gelu(0)');
  close(live.gelu(1), 0.8413447460685429, 2e-7, 'gelu(1)');
  close(live.gelu(-1), -0.15865525393145707, 2e-7, 'gelu(-1)');
  close(live.gelu(3), 2.9959502080674117, 1e-6, 'gelu(3)');
  close(live.gelu(-10), 0, 1e-9, 'gelu(-10)');
  close(live.geluTanh(1), 0.8411919906082768, 1e-9, 'geluTanh(1)');
  close(live.geluTanh(-2), -0.04540230591222, 1e-9, 'geluTanh(-2)');
});

test('softmax rows sum to 1 and survive large logits', () => {
  const buf = new Float32Array([1, 2, 3, 1000, 1000, -1000, -5, -5, -5]);
  live.softmaxRows(buf, 3, 3);
  for (let r = 0; r < 3; r++) close(buf[3 * r] + buf[3 * r + 1] + buf[3 * r + 2], 1, 1e-6, `row ${r} sum`);
  close(buf[2], Math.exp(3) / (Math.exp(1) + Math.exp(2) + Math.exp(3)), 1e-6, 'softmax([1, 2, 3])[2]');
  close(buf[3], 0.5, 1e-6, 'tied large logits');
  close(buf[5], 0, 1e-6, 'a very small logit');
  close(buf[7], 1 / 3, 1e-6, 'equal logits');
});

// Rice-codes rows of integer codes as reportgen/live/weights.py rice_rows does (rows with step 0 left out).
function riceEncode(rows, k, steps) {
  const bits = [];
  rows.forEach((row, r) => {
    if (steps[r] === 0) return;
    for (const q of row) {
      const u = q >= 0 ? 2 * q : -2 * q - 1;
      for (let i = 0; i < u >> k; i++) bits.push(1);
      bits.push(0);
      for (let b = 0; b < k; b++) bits.push((u >> b) & 1);
    }
    while (bits.length % 8) bits.push(0);
  });
  const out = new Uint8Array(bits.length / 8);
  bits.forEach((bit, i) => { if (bit) out[i >> 3] |= 1 << (i & 7); });
  return out;
}

test('Rice codes: the bytes of the Python test decode to the same codes', () => {
  // codes 0, -1, 2 with k = 1 (tests/live/test_live_model.py): bits 0,0, 0,1, 1,1,0,0
  const out = new Int16Array(3);
  assert.strictEqual(live.riceRows(new Uint8Array([0b00111000]), 0, 1, 3, 1, [1], out), 1);
  assert.deepStrictEqual(Array.from(out), [0, -1, 2]);
});

test('Rice codes round-trip for every parameter, rows on byte boundaries, zero-step rows skipped', () => {
  const rows = [[0, 1, -1, 5, -40, 300], [0, 0, 0, 0, 0, 0], [7, -7, 2, -2, 1, 0], [32767, -32767, 0, 3, -3, 9]];
  const steps = [0.5, 0, 1, 2];
  for (const k of [0, 1, 3, 6, 10, 14]) {
    const bytes = riceEncode(rows, k, steps);
    const padded = new Uint8Array(bytes.length + 3);
    padded.set(bytes, 3); // from byte 3: the start offset is honoured
    const out = new Int16Array(24);
    assert.strictEqual(live.riceRows(padded, 3, 4, 6, k, steps, out), padded.length, `k = ${k}: the end offset`);
    assert.deepStrictEqual(Array.from(out), [].concat(...rows), `k = ${k}`);
  }
});

// Bytes as reportgen/site/live_page.py pack_text writes them: 47-bit groups as three digits of 52016, each digit a
// character of DIGIT_RANGES.
const RANGES = [[0x1000, 0x2028], [0x202a, 0xd800], [0xe000, 0xfdd0]];
function charOf(digit) {
  for (const [start, end] of RANGES) {
    if (digit < end - start) return String.fromCharCode(start + digit);
    digit -= end - start;
  }
  throw new Error('digit out of range');
}

function packText(bytes) {
  let bits = 0n;
  bytes.forEach((byte, i) => { bits |= BigInt(byte) << BigInt(8 * i); });
  let text = '';
  for (let group = 0; group * 47 < bytes.length * 8; group++) {
    let value = (bits >> BigInt(47 * group)) & ((1n << 47n) - 1n);
    for (let d = 0; d < 3; d++) {
      text += charOf(Number(value % 52016n));
      value /= 52016n;
    }
  }
  return text;
}

test('weights text: three characters for every 47 bits, least significant first', () => {
  // 0xff, 0x01 -> the value 0x1ff: digits 511, 0, 0
  assert.strictEqual(packText([0xff, 0x01]), String.fromCharCode(0x1000 + 511, 0x1000, 0x1000));
  const out = new Uint8Array(4);
  assert.strictEqual(live.textToBytes(packText([0xff, 0x01]), out, 1, 2), 2);
  assert.deepStrictEqual(Array.from(out), [0, 0xff, 0x01, 0]);
  const bytes = Uint8Array.from({ length: 1001 }, (_, i) => (i * 97 + 13) & 255);
  const back = new Uint8Array(1001);
  assert.strictEqual(live.textToBytes(packText(bytes), back, 0, 1001), 1001);
  assert.deepStrictEqual(back, bytes);
  assert.strictEqual(live.textToBytes(packText(bytes).slice(0, 99), back, 0, 1001), 193, 'a cut text says so');
  const top = new Uint8Array(47).fill(255); // digits near the radix: the third range
  assert.deepStrictEqual(live.textToBytes(packText(top), new Uint8Array(47), 0, 47), 47);
  const again = new Uint8Array(47);
  live.textToBytes(packText(top), again, 0, 47);
  assert.deepStrictEqual(again, top);
});

// A spec and its bytes from [name, shape, encoding, bytes, extra entry fields] (the extra fields optional).
function build(arch, tensors) {
  const table = [];
  const parts = [];
  let offset = 0;
  for (const [name, shape, encoding, bytes, extra] of tensors) {
    table.push(Object.assign({ name, shape, encoding, offset, length: bytes.length }, extra));
    const padded = new Uint8Array(Math.ceil(bytes.length / 4) * 4);
    padded.set(bytes);
    parts.push(padded);
    offset += padded.length;
  }
  const data = new Uint8Array(offset);
  let at = 0;
  for (const part of parts) { data.set(part, at); at += part.length; }
  return { spec: Object.assign({ tensors: table }, arch), bytes: data };
}

function f32(values) {
  const view = new DataView(new ArrayBuffer(values.length * 4));
  values.forEach((v, i) => view.setFloat32(i * 4, v, true));
  return new Uint8Array(view.buffer);
}

function concat(a, b) {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

// One layer, one head, width 2: token 0 embeds as (1, 0) and token 1 as (0, 1); the LayerNorm (gamma 1, beta 0)
// makes them (1, -1) and (-1, 1); identity query/key/value/output weights, zero biases.
function handModel(wordTensor, positions = 4) {
  const eye = f32([1, 0, 0, 1]);
  const zero2 = f32([0, 0]);
  const one2 = f32([1, 1]);
  const tensors = [
    wordTensor || ['embeddings.word', [2, 2], 'f32', f32([1, 0, 0, 1])],
    ['embeddings.position', [positions, 2], 'f32', f32(new Array(positions * 2).fill(0))],
    ['embeddings.norm.weight', [2], 'f32', one2], ['embeddings.norm.bias', [2], 'f32', zero2],
  ];
  for (const part of ['query', 'key', 'value', 'output']) {
    tensors.push([`layers.0.${part}.weight`, [2, 2], 'f32', eye], [`layers.0.${part}.bias`, [2], 'f32', zero2]);
  }
  // the last (here the only) layer ends at its output matrix: no feed-forward block is exported for it
  const arch = { layers: 1, heads: 1, hidden: 2, intermediate: 2, embedding: 2, vocab: 2,
    type_vocab: 0, layer_norm_eps: 1e-12, activation: 'gelu', embedding_projection: false, max_positions: positions };
  return build(arch, tensors);
}

test('a one-layer hand-made model: attention and value norms by hand', () => {
  const { spec, bytes } = handModel();
  const model = live.decodeWeights(spec, bytes);
  const { attention, norms } = live.forward(model, [0, 1, 0], [0, 0, 0]);
  assert.strictEqual(attention.length, 9);
  assert.strictEqual(norms.length, 3);
  // scores: q.k / sqrt(2) = +sqrt(2) for equal tokens, -sqrt(2) for different ones
  const same = Math.exp(Math.SQRT2);
  const other = Math.exp(-Math.SQRT2);
  const rows = [[same, other, same], [other, same, other], [same, other, same]];
  rows.forEach((row, i) => {
    const total = row[0] + row[1] + row[2];
    row.forEach((value, j) => close(attention[i * 3 + j], value / total, 1e-6, `attention[${i}][${j}]`));
  });
  // f(x_j) = x_j (identity value and output weights): ||(1, -1)|| = sqrt(2)
  for (let j = 0; j < 3; j++) close(norms[j], Math.SQRT2, 1e-6, `norm ${j}`);
});

test('nine tokens (blocks of four keys and one left over): attention and norms by hand', () => {
  const { spec, bytes } = handModel(undefined, 9);
  const ids = [0, 1, 0, 0, 1, 1, 0, 1, 0];
  const { attention, norms } = live.forward(live.decodeWeights(spec, bytes), ids, null);
  const same = Math.exp(Math.SQRT2), other = Math.exp(-Math.SQRT2);
  ids.forEach((query, i) => {
    const row = ids.map((key) => (key === query ? same : other));
    const total = row.reduce((a, b) => a + b, 0);
    row.forEach((value, j) => close(attention[i * 9 + j], value / total, 1e-6, `attention[${i}][${j}]`));
  });
  norms.forEach((norm, j) => close(norm, Math.SQRT2, 1e-6, `norm ${j}`));
});

test('linear: every block of four tokens by two outputs and every row and output left over', () => {
  const inp = 5;
  for (let rows = 1; rows <= 9; rows++) {
    for (let out = 1; out <= 5; out++) {
      const x = Float32Array.from({ length: rows * inp }, (_, i) => ((i * 7) % 11) - 5);
      const weight = Float32Array.from({ length: out * inp }, (_, i) => ((i * 5) % 13) / 4 - 1);
      const bias = Float32Array.from({ length: out }, (_, o) => o / 2);
      const y = live.linear(x, rows, inp, weight, bias, out);
      for (let t = 0; t < rows; t++) {
        for (let o = 0; o < out; o++) {
          let want = bias[o];
          for (let i = 0; i < inp; i++) want += x[t * inp + i] * weight[o * inp + i];
          close(y[t * out + o], want, 1e-6, `rows ${rows} out ${out}: y[${t}][${o}]`);
        }
      }
    }
  }
});

test('a Rice-coded table decodes to code * row step', () => {
  // two rows: codes (3, 0) at step 1/3 -> (1, 0); codes (0, -5) at step -1/5 -> (0, 1)
  const codes = riceEncode([[3, 0], [0, -5]], 2, [1, 1]);
  const word = ['embeddings.word', [2, 2], 'rice', concat(f32([1 / 3, -1 / 5]), codes), { rice_bits: 2 }];
  const { spec, bytes } = handModel(word);
  const quantized = live.forward(live.decodeWeights(spec, bytes), [1, 0], null).attention;
  const exact = handModel();
  const reference = live.forward(live.decodeWeights(exact.spec, exact.bytes), [1, 0], null).attention;
  for (let i = 0; i < 4; i++) close(quantized[i], reference[i], 1e-6, `attention ${i}`);
  assert.throws(() => live.decodeWeights(handModel(['embeddings.word', [2, 2], 'q6', f32([1, 0, 0, 1])]).spec,
    handModel().bytes), /unknown encoding q6 of embeddings.word/);
});

test('float16 values decode as IEEE 754 half precision', () => {
  // bit patterns -> values: one, minus two, the smallest subnormal, the largest finite, infinities, a third
  const known = [[0x3c00, 1], [0xc000, -2], [0x0001, Math.pow(2, -24)], [0x7bff, 65504], [0x7c00, Infinity],
    [0xfc00, -Infinity], [0x3555, 0.333251953125], [0x0000, 0], [0x8000, -0]];
  const bytes = new Uint8Array(known.length * 2 + 2);
  const view = new DataView(bytes.buffer);
  known.forEach(([bits], i) => view.setUint16(2 + i * 2, bits, true)); // from byte 2: an offset is honoured
  const values = live.readHalfs(bytes, 2, known.length);
  known.forEach(([bits, value], i) => assert.ok(Object.is(values[i], value), `0x${bits.toString(16)}: ${values[i]}`));
  assert.ok(Number.isNaN(live.readHalfs(new Uint8Array([0x01, 0x7e]), 0, 1)[0]));
});
