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
