// The query/key table arithmetic of views-core.js: q * k, q . k and softmax(q . k * scaling).
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');

const views = require(path.join(__dirname, '..', '..', 'site_src', 'assets', 'javascripts', 'views-core.js'));

// 3 tokens, head_dim 2, row-major [token * dim + d]
const QUERIES = Float32Array.from([1, 0, 0.5, -2, 3, 1]);
const KEYS = Float32Array.from([2, 1, -1, 0.25, 0, -4]);

test('one query row: elementwise products, dot products and the colour scales', () => {
  const table = views.queryKeyRows(QUERIES, KEYS, 1, 2, 1);
  // query 1 is (0.5, -2)
  assert.deepStrictEqual(Array.from(table.products), [1, -2, -0.5, -0.5, 0, 8]);
  assert.deepStrictEqual(Array.from(table.dots), [-1, -1, 8]);
  assert.strictEqual(table.maxAbs, 4); // over every query and key of the head
  assert.strictEqual(table.maxProduct, 8);
});

test('softmax of the scaled dot products matches the textbook formula and sums to 1', () => {
  const scaling = 1 / Math.sqrt(2);
  const table = views.queryKeyRows(QUERIES, KEYS, 2, 2, scaling);
  const dots = [3 * 2 + 1 * 1, 3 * -1 + 1 * 0.25, 3 * 0 + 1 * -4];
  assert.deepStrictEqual(Array.from(table.dots), dots);
  const exps = dots.map((dot) => Math.exp(dot * scaling));
  const total = exps.reduce((a, b) => a + b, 0);
  exps.forEach((value, k) => assert.ok(Math.abs(table.softmax[k] - value / total) < 1e-15, `key ${k}`));
  assert.ok(Math.abs(table.softmax.reduce((a, b) => a + b, 0) - 1) < 1e-15);
});

test('softmax stays finite for scores far beyond exp range', () => {
  const soft = views.softmax(Float64Array.from([1000, 999, -1000]), 1);
  assert.ok(soft.every(Number.isFinite));
  assert.ok(Math.abs(soft[0] - 1 / (1 + Math.exp(-1))) < 1e-15 && soft[2] === 0);
});

// One layer of 12-bit q/k data (tests/js/decode.test.js QK_LAYER: 2 heads, 3 tokens, head_dim 2).
const QK_LAYER = '/w9AAPn/AQCA/w/AAQCgABgAAhAAOgIQgDoDGMA6AhCAOgIQADoCEAA7IJcCOgiG9TkAAAAAU8YzO+QuZzvGXqs6/0kkDv8O//////v/' +
  'AfL/qh4A/x8A/w+AOfb/aubMOGrmTDnQrJk5AxhAOpxJszk2g+Y5AKCqMgAAAAC4Dbk5gICAO4CAADvaV347/wAAf4D/AAL/';

test('softmax from the stored 12-bit vectors is within the bound of reportgen/views.py of the float one', () => {
  const head = views.decodeQKLayer(QK_LAYER, 2, 3, 2)[0];
  const scaling = 1 / Math.sqrt(2);
  const table = views.queryKeyRows(head.q, head.k, 1, 2, scaling);
  const exact = views.queryKeyRows(Float64Array.from([1, -0.5, 0.25, 2, -3, 0]), KEYS, 1, 2, scaling);
  // per-vector step: max |v| / 2047; |q . k - q^ . k^| <= |q^|_1 e_k + |k^|_1 e_q + D e_q e_k (e = step / 2)
  const step = (vector) => Math.max(...vector.map(Math.abs)) / 2047;
  const eq = step([0.25, 2]) / 2;
  let worst = 0;
  for (let k = 0; k < 3; k++) {
    const key = Array.from(KEYS.slice(2 * k, 2 * k + 2));
    const ek = step(key) / 2;
    const bound = scaling * ((0.25 + 2) * ek + key.reduce((a, b) => a + Math.abs(b), 0) * eq + 2 * eq * ek);
    assert.ok(Math.abs(table.dots[k] - exact.dots[k]) * scaling <= bound * (1 + 1e-6), `key ${k}`);
    worst = Math.max(worst, bound);
  }
  for (let k = 0; k < 3; k++) assert.ok(Math.abs(table.softmax[k] - exact.softmax[k]) <= worst / 2, `softmax ${k}`);
  assert.ok(table.dots.some((dot, k) => dot !== exact.dots[k])); // the vectors really are rounded
});
