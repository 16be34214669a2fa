// Score terms and masked keys on the query/key page (views-core.js decodeTerms, unpackBits, decodeVisible,
// queryKeyRows, softmax, qkSoftmaxText): DeBERTa's c2p/p2c (He et al. 2021), MPNet's relative position
// bias (Song et al. 2020), ModernBERT's sliding window.
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');

const views = require(path.join(__dirname, '..', '..', 'site_src', 'assets', 'javascripts', 'views-core.js'));
require(path.join(__dirname, '..', '..', 'site_src', 'assets', 'javascripts', 'views-qk-long.js')); // qkShownKeys

// One layer made with reportgen.site.views.qk_payload (1 layer, 2 heads, 3 tokens, head_dim 2, scaling 0.5) from
// the vectors of tests/js/decode.test.js QK_LAYER, every weight 1/3, one term "position" [head][query][key]
//   head 0: (0.5, -1, 0.25), (2, 0, -0.5), (0.1, 0.2, 0.3)     head 1: (-0.75, 0.5, 1.5), (0, 0, 3), (1, -1, 0)
// and qk_visible (1, 1, 0), (1, 1, 1), (0, 1, 1): 9 term codes per head (one padding code), and the terms on the
// two masked keys stored as 0. The expectations are numpy's decoding (decode_qk_layer, dequantise_vectors,
// decoded_softmax), printed with repr.
const LAYER = '/w9AAPn/AQCA/w/AAQCgABgAAhAAOgIQgDoDGMA6AhCAOgIQADoCEAA7AAAAAAAAAAAAAAAAAVarOgFWqzoBVqs6////////////' +
  'ABwAAPj/AAhgAFjV/w+AAhAAOgIQgDrQrBk5//v/AfL/qh4A/x8A/w+AOfb/aubMOGrmTDnQrJk5AxhAOpxJszk2g+Y5AAAAAAAAAAAAAAAA' +
  'AVarOgFWqzoBVqs6////////////AVDVAAiAAPj/ABgAAAiAAxjAOQMYwDoCEAA6';
// The same layer without the model's weights (combined_payload, a single-file view).
const LEAN = '/w9AAPn/AQCA/w/AAQCgABgAAhAAOgIQgDoDGMA6AhCAOgIQADoCEAA7ABwAAPj/AAhgAFjV/w+AAhAAOgIQgDrQrBk5' +
  '//v/AfL/qh4A/x8A/w+AOfb/aubMOGrmTDnQrJk5AxhAOpxJszk2g+Y5AVDVAAiAAPj/ABgAAAiAAxjAOQMYwDoCEAA6';
const VISIBLE = 'uwE='; // bytes 187, 1
const TERMS = [
  [0.5002442598342896, -0.9999999998835847, 0.0, 1.9999999997671694, 0.0, -0.5002442598342896, 0.0,
    0.2000488678459078, 0.3000000237952918],
  [-0.7499999999126885, 0.500122129888041, 0.0, 0.0, 0.0, 2.999999999650754, 0.0, -0.9999999998835847, 0.0],
];
const QUERIES = [
  [0.9999999998835847, -0.5002442598342896, 0.2501221299171448, 1.9999999997671694, -2.999999999650754, 0.0],
  [0.09995115098718088, 0.20000000593427103, -0.2999511569214519, 0.40000001186854206, 0.5000488916411996,
    -0.6000000475905836],
];
const THIRD = 0.3333333431510255;
const SOFTMAX = [ // decoded_softmax(..., 0.5, terms, visible) [head][query][key]
  [[0.9433508356776861, 0.05664916432231397, 0.0], [0.9575396583843288, 0.04204824100930572, 0.0004121006063653409],
    [0.0, 0.8021916392019276, 0.19780836079807237]],
  [[0.20421727773080514, 0.7957827222691948, 0.0], [0.022518198730212314, 0.03427116362484572, 0.943210637644942],
    [0.0, 0.3763744022646641, 0.6236255977353359]],
];

test('unpackBits reads little-endian bits, as numpy packbits(bitorder="little") writes them', () => {
  // 187 = 0b10111011: bits 0..7 are 1 1 0 1 1 1 0 1; then bit 0 of 1
  assert.deepStrictEqual(Array.from(views.unpackBits(Uint8Array.from([187, 1]), 9)), [1, 1, 0, 1, 1, 1, 0, 1, 1]);
  assert.deepStrictEqual(Array.from(views.unpackBits(Uint8Array.from([0x80]), 8)), [0, 0, 0, 0, 0, 0, 0, 1]);
  assert.throws(() => views.unpackBits(Uint8Array.from([255]), 9), /fewer than 9 bits/);
});

test('decodeVisible gives which keys each query sees, and null for a layer that masks nothing', () => {
  assert.deepStrictEqual(Array.from(views.decodeVisible(VISIBLE, 3)), [1, 1, 0, 1, 1, 1, 0, 1, 1]);
  assert.strictEqual(views.decodeVisible(null, 3), null);
});

test('decodeVisible of a causal layer: each query sees itself and the keys before it', () => {
  assert.deepStrictEqual(Array.from(views.decodeVisible('causal', 3)), [1, 0, 0, 1, 1, 0, 1, 1, 1]);
  assert.deepStrictEqual(Array.from(views.decodeVisible('causal', 1)), [1]);
});

test('qkShownKeys: every key of a short input; past a page, the most weighed keys or a range', () => {
  assert.deepStrictEqual(views.qkShownKeys(Float64Array.from([0.2, 0.5, 0.3]), 3, 'top', 4), [0, 1, 2]);
  const softmax = Float64Array.from([0.1, 0.4, 0, 0.4, 0.05, 0.05]);
  assert.deepStrictEqual(views.qkShownKeys(softmax, 6, 'top', 3), [1, 3, 0]); // ties in key order
  assert.deepStrictEqual(views.qkShownKeys(softmax, 6, 0, 4), [0, 1, 2, 3]);
  assert.deepStrictEqual(views.qkShownKeys(softmax, 6, 1, 4), [4, 5]); // the last page is short
  assert.deepStrictEqual(views.qkShownKeys(softmax, 6, 9, 4), [5]); // a page past the end keeps the last key
});

test('decodeQKLayer with terms gives the vectors, the weights and the terms exactly as numpy decodes them', () => {
  const heads = views.decodeQKLayer(LAYER, 2, 3, 2, null, 1);
  for (let head = 0; head < 2; head++) {
    assert.deepStrictEqual(Array.from(heads[head].q), QUERIES[head]);
    assert.deepStrictEqual(Array.from(heads[head].model), new Array(9).fill(THIRD));
    assert.strictEqual(heads[head].terms.length, 1);
    assert.deepStrictEqual(Array.from(heads[head].terms[0]), TERMS[head]);
  }
  // per head 18 + 48 + 9 bytes as before, then 15 for 9 codes (+ 1 padding) and 12 for 3 row scales
  assert.throws(() => views.decodeQKLayer(LAYER, 2, 3, 2), /query\/key data of 204 bytes, not 150/);
  assert.throws(() => views.decodeQKLayer(LAYER, 2, 3, 2, null, 2), /204 bytes, not 252/);
  const lean = views.decodeQKLayer(LEAN, 2, 3, 2, (head) => 'w' + head, 1);
  assert.deepStrictEqual(Array.from(lean[1].terms[0]), TERMS[1]);
  assert.deepStrictEqual(Array.from(lean[0].q), QUERIES[0]);
  assert.strictEqual(lean[1].model, 'w1');
  // the same blocks without their terms are a payload of before: an empty list of terms per head
  const bytes = Buffer.from(LAYER, 'base64');
  const bare = Buffer.concat([0, 1].map((head) => bytes.subarray(head * 102, head * 102 + 75))).toString('base64');
  const plain = views.decodeQKLayer(bare, 2, 3, 2);
  assert.deepStrictEqual(plain[1].terms, []);
  assert.deepStrictEqual(Array.from(plain[1].q), QUERIES[1]);
});

test('queryKeyRows adds the terms to the scaled dot products and leaves masked keys out of the softmax', () => {
  // 3 tokens, head_dim 2: query 1 is (0, 2); keys (1, 0), (0, 1), (2, 2)
  const queries = Float64Array.from([1, 0, 0, 2, 1, 1]);
  const keys = Float64Array.from([1, 0, 0, 1, 2, 2]);
  const terms = [Float64Array.from([9, 9, 9, 1, 0, -1, 9, 9, 9]), Float64Array.from([0, 0, 0, 0.5, 0.5, 0.5, 0, 0, 0])];
  const visible = Uint8Array.from([1, 1, 1, 1, 1, 0, 1, 1, 1]);
  const rows = views.queryKeyRows(queries, keys, 1, 2, 0.5, terms, visible);
  assert.deepStrictEqual(Array.from(rows.dots), [0, 2, 4]);
  assert.deepStrictEqual(rows.termValues.map((row) => Array.from(row)), [[1, 0, -1], [0.5, 0.5, 0.5]]);
  assert.deepStrictEqual(Array.from(rows.scores), [1.5, 1.5, 1.5]); // 0.5 q . k + 1st term + 2nd term
  assert.deepStrictEqual(Array.from(rows.seen), [1, 1, 0]);
  assert.strictEqual(rows.masked, 1);
  assert.deepStrictEqual(Array.from(rows.softmax), [0.5, 0.5, 0]); // equal scores over the two visible keys
  const open = views.queryKeyRows(queries, keys, 1, 2, 0.5, terms, null);
  assert.deepStrictEqual(Array.from(open.softmax), [1 / 3, 1 / 3, 1 / 3]);
  assert.strictEqual(open.seen, null);
  assert.strictEqual(open.masked, 0);
});

test('queryKeyRows without terms or mask computes what it always did, to the bit', () => {
  const queries = Float64Array.from([1, 0, 0.5, -2, 3, 1]);
  const keys = Float64Array.from([2, 1, -1, 0.25, 0, -4]);
  const scaling = 1 / Math.sqrt(2);
  const rows = views.queryKeyRows(queries, keys, 2, 2, scaling);
  // the softmax as views-core.js wrote it before terms existed
  const top = Math.max(...rows.dots.map((dot) => dot * scaling));
  const exps = Array.from(rows.dots, (dot) => Math.exp(dot * scaling - top));
  const total = exps.reduce((a, b) => a + b, 0);
  assert.deepStrictEqual(Array.from(rows.softmax), exps.map((value) => value / total));
  assert.deepStrictEqual(Array.from(rows.scores), Array.from(rows.dots, (dot) => dot * scaling));
  assert.deepStrictEqual(rows.termValues, []);
  assert.strictEqual(rows.masked, 0);
});

test('the page\'s softmax of the stored layer is numpy\'s decoded_softmax with the terms and the mask', () => {
  const heads = views.decodeQKLayer(LAYER, 2, 3, 2, null, 1);
  const visible = views.decodeVisible(VISIBLE, 3);
  for (let head = 0; head < 2; head++) {
    for (let token = 0; token < 3; token++) {
      const rows = views.queryKeyRows(heads[head].q, heads[head].k, token, 2, 0.5, heads[head].terms, visible);
      rows.softmax.forEach((value, k) => {
        assert.ok(Math.abs(value - SOFTMAX[head][token][k]) < 1e-15, `head ${head} query ${token} key ${k}`);
      });
    }
  }
  // head 0, query 0 by hand: scores 0.5 (2 - 0.5 x 1.0005) + 0.5002 and 0.5 (-1 - 0.5 x 0.2501) - 1; key 2 masked
  const first = views.queryKeyRows(heads[0].q, heads[0].k, 0, 2, 0.5, heads[0].terms, visible);
  assert.ok(Math.abs(first.scores[0] - 1.25) < 1e-3 && Math.abs(first.scores[1] - -1.5626) < 1e-3);
  assert.ok(Math.abs(first.softmax[0] - 1 / (1 + Math.exp(-2.8126))) < 1e-4 && first.softmax[2] === 0);
});

test('softmax over the visible keys only; a row that sees none is all 0', () => {
  const soft = views.softmax(Float64Array.from([0, Math.log(3), 5]), 1, Uint8Array.from([1, 1, 0]));
  assert.ok(Math.abs(soft[0] - 0.25) < 1e-15 && Math.abs(soft[1] - 0.75) < 1e-15 && soft[2] === 0);
  const scaled = views.softmax(Float64Array.from([0, 2 * Math.log(3), -1]), 0.5, [1, 1, 0]);
  assert.ok(Math.abs(scaled[1] - 0.75) < 1e-15 && scaled[2] === 0);
  assert.deepStrictEqual(Array.from(views.softmax(Float64Array.from([1, 2]), 1, Uint8Array.from([0, 0]))), [0, 0]);
});

test('qkSoftmaxText names the terms and the keys the model masks; without them it reads as before', () => {
  const scaling = 1 / Math.sqrt(3 * 64); // DeBERTa-base: 1 / sqrt(3 d)
  assert.strictEqual(views.qkSoftmaxText(scaling, ['c2p', 'p2c'], 12, 0),
    'softmax(q \u00b7 k \u00d7 0.07217 + c2p + p2c) over 12 keys');
  assert.strictEqual(views.qkSoftmaxText(0.125, ['position'], 12, 3),
    'softmax(q \u00b7 k \u00d7 0.1250 + position) over 9 of 12 keys (the model masks 3 for this query)');
  assert.strictEqual(views.qkSoftmaxText(0.125, [], 19, 0), 'softmax(q \u00b7 k \u00d7 0.1250) over 19 keys');
});
