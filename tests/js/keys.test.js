// Top-k key selection (pickKeys) and the sentence groups of the pair filter, from views-core.js.
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');

const views = require(path.join(__dirname, '..', '..', 'site_src', 'assets', 'javascripts', 'views-core.js'));

const everyKey = () => true;

// What pickKeys must return: the allowed keys >= min, by weight descending (ties: lower key first), the first topk.
function reference(matrix, n, q, topk, min, allow) {
  const keys = [];
  for (let k = 0; k < n; k++) if (matrix[q * n + k] >= min && allow(q, k)) keys.push(k);
  keys.sort((a, b) => matrix[q * n + b] - matrix[q * n + a] || a - b);
  return keys.slice(0, topk);
}

test('pickKeys: largest first, ties keep the earlier key, min and the filter apply', () => {
  const matrix = Float64Array.from([
    0.1, 0.4, 0.05, 0.4, 0.05, // row 0
    0.2, 0.2, 0.2, 0.2, 0.2, // row 1
  ]);
  assert.deepStrictEqual(views.pickKeys(matrix, 5, 0, 2, 0, everyKey), [1, 3]);
  assert.deepStrictEqual(views.pickKeys(matrix, 5, 0, 5, 0, everyKey), [1, 3, 0, 2, 4]);
  assert.deepStrictEqual(views.pickKeys(matrix, 5, 0, 5, 0.06, everyKey), [1, 3, 0]);
  assert.deepStrictEqual(views.pickKeys(matrix, 5, 0, 5, 0.5, everyKey), []);
  assert.deepStrictEqual(views.pickKeys(matrix, 5, 0, 2, 0, (q, k) => k !== 1), [3, 0]);
  assert.deepStrictEqual(views.pickKeys(matrix, 5, 1, 3, 0, everyKey), [0, 1, 2]);
});

test('pickKeys agrees with sorting on random rows with many ties', () => {
  let seed = 12345;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  const n = 40;
  const matrix = Float64Array.from({ length: n * n }, () => Math.floor(random() * 8) / 8); // 8 levels: ties
  const odd = (q, k) => (q + k) % 2 === 1;
  for (let q = 0; q < n; q++) {
    const cases = [[1, 0, everyKey], [5, 0, everyKey], [7, 0.3, odd], [n, 0, everyKey], [n, 0.5, odd]];
    for (const [topk, min, allow] of cases) {
      assert.deepStrictEqual(views.pickKeys(matrix, n, q, topk, min, allow), reference(matrix, n, q, topk, min, allow),
        `row ${q}, top ${topk}, min ${min}`);
    }
  }
});

test('pairGroups: special tokens (segment -1) join the sentence before them', () => {
  // [CLS] a b [SEP] c d [SEP]: the middle [SEP] stays with A, the last one with B, as in bertviz
  assert.deepStrictEqual(views.pairGroups([-1, 0, 0, -1, 1, 1, -1]), ['A', 'A', 'A', 'A', 'B', 'B', 'B']);
  // a single sentence is all A
  assert.deepStrictEqual(views.pairGroups([-1, 0, 0, -1]), ['A', 'A', 'A', 'A']);
});
