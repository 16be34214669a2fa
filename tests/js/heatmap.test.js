// views-heatmap.js's pure parts (max-pooling, the window's zoom and pan) and views-core.js's window links.
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');

const scripts = path.join(__dirname, '..', '..', 'site_src', 'assets', 'javascripts');
const views = require(path.join(scripts, 'views-core.js'));
require(path.join(scripts, 'views-heatmap.js')); // adds its functions to the same object

// n x n with w[q][k] = (q * n + k) / n^2: every block's maximum is its bottom-right corner.
function ramp(n) {
  return Float64Array.from({ length: n * n }, (_, i) => i / (n * n));
}

test('maxPool takes each block\'s largest weight, over blocks splitting the window evenly', () => {
  const n = 10;
  const pooled = views.maxPool(ramp(n), n, { q0: 0, q1: n, k0: 0, k1: n }, 4, 3);
  assert.deepStrictEqual([pooled.rows, pooled.cols], [4, 3]);
  assert.deepStrictEqual(Array.from(pooled.qEdges), [0, 2, 5, 7, 10]);
  assert.deepStrictEqual(Array.from(pooled.kEdges), [0, 3, 6, 10]);
  pooled.values.forEach((value, i) => {
    const r = Math.floor(i / 3);
    const c = i % 3;
    const corner = (pooled.qEdges[r + 1] - 1) * n + pooled.kEdges[c + 1] - 1;
    assert.strictEqual(value, Math.fround(corner / (n * n)), `cell ${r},${c}`);
  });
});

test('a window narrower than the cells asked for gets a cell per token, never an empty one', () => {
  const n = 300;
  const matrix = ramp(n);
  const pooled = views.maxPool(matrix, n, { q0: 40, q1: 45, k0: 290, k1: 300 }, 480, 480);
  assert.deepStrictEqual([pooled.rows, pooled.cols], [5, 10]);
  assert.strictEqual(pooled.values[0], Math.fround(matrix[40 * n + 290]));
  assert.strictEqual(pooled.values[49], Math.fround(matrix[44 * n + 299]));
});

test('maxPool leaves out the pairs allow() refuses (a causal group\'s upper triangle)', () => {
  const n = 4;
  const matrix = Float64Array.from({ length: n * n }, (_, i) => (Math.floor(i / n) >= i % n ? 0.1 : 0.9));
  const pooled = views.maxPool(matrix, n, { q0: 0, q1: n, k0: 0, k1: n }, 2, 2, (q, k) => k <= q);
  assert.deepStrictEqual(Array.from(pooled.values).map((v) => Math.round(v * 10) / 10), [0.1, 0, 0.1, 0.1]);
});

test('a pixel\'s opacity is the square root of its weight', () => {
  assert.deepStrictEqual([0, 0.01, 0.25, 1, 2, -1].map(views.heatAlpha), [0, 26, 128, 255, 255, 0]);
});

test('zoom halves or doubles the window around a point and stays within the tokens', () => {
  const whole = { q0: 0, q1: 1024, k0: 0, k1: 1024 };
  assert.deepStrictEqual(views.zoomWindow(whole, 1024, 1024, 0.5, 512, 512), { q0: 256, q1: 768, k0: 256, k1: 768 });
  assert.deepStrictEqual(views.zoomWindow(whole, 1024, 1024, 0.5, 10, 1020), { q0: 0, q1: 512, k0: 512, k1: 1024 });
  const small = { q0: 100, q1: 110, k0: 0, k1: 9 };
  assert.deepStrictEqual(views.zoomWindow(small, 1024, 300, 0.5, 105, 4), { q0: 101, q1: 109, k0: 0, k1: 8 });
  assert.deepStrictEqual(views.zoomWindow({ q0: 0, q1: 600, k0: 0, k1: 600 }, 1024, 1024, 2, 300, 300),
    whole);
});

test('pan moves the window by a share of its span, never past either end', () => {
  const win = { q0: 256, q1: 512, k0: 0, k1: 256 };
  assert.deepStrictEqual(views.panWindow(win, 1024, 1024, 0.25, 0), { q0: 320, q1: 576, k0: 0, k1: 256 });
  assert.deepStrictEqual(views.panWindow(win, 1024, 1024, 0, -0.25), win);
  assert.deepStrictEqual(views.panWindow(win, 600, 1024, 2, 0), { q0: 344, q1: 600, k0: 0, k1: 256 });
});

test('a window link reads as first-last tokens, inclusive, and writes back the same', () => {
  assert.deepStrictEqual(views.parseWindow('100-163,90-153', 512, 512), { q0: 100, q1: 164, k0: 90, k1: 154 });
  assert.strictEqual(views.windowText({ q0: 100, q1: 164, k0: 90, k1: 154 }), '100-163,90-153');
  for (const bad of ['163-100,0-9', '0-512,0-9', '0-9', 'a-b,c-d', '0-9,0-9,0-9', '-1-5,0-9', '']) {
    assert.strictEqual(views.parseWindow(bad, 512, 512), null, bad);
  }
  assert.strictEqual(views.parseWindow('0-9,0-20', 512, 20), null); // keys: the other side's count
});

test('parseHash gives the window and names a bad one among its problems', () => {
  const limits = { layers: 6, heads: 12, tokens: 512, contributions: true };
  const good = views.parseHash('#view=head&layer=2&head=4&win=100-163,90-153', limits);
  assert.deepStrictEqual(good.win, { q0: 100, q1: 164, k0: 90, k1: 154 });
  assert.deepStrictEqual(good.problems, []);
  const bad = views.parseHash('#view=head&win=9-1,0-3', limits);
  assert.strictEqual(bad.win, null);
  assert.deepStrictEqual(bad.problems, [{ field: 'win', given: '9-1,0-3' }]);
  assert.match(views.hashNote(bad.problems, limits, {}), /window of queries and keys/);
  assert.strictEqual(views.formatHash({ view: 'head', layer: 2, win: '100-163,90-153' }),
    'view=head&layer=2&win=100-163,90-153');
});

test('axis labels: every token where each has room, else every step-th, each centred on its token', () => {
  const every = views.axisLabels(100, 116, 480); // 30 px a token
  assert.deepStrictEqual(every.map((l) => l.index), Array.from({ length: 16 }, (_, i) => 100 + i));
  assert.strictEqual(every[0].at, 15);
  assert.strictEqual(every[15].at, 465);
  const whole = views.axisLabels(0, 1024, 480); // 0.47 px a token: a label every 30 tokens
  const step = Math.ceil(1024 * views.LABEL_PX / 480);
  assert.deepStrictEqual(whole.map((l) => l.index), Array.from({ length: Math.ceil(1024 / step) }, (_, i) => i * step));
  for (const [a, b] of whole.slice(1).map((l, i) => [whole[i], l])) {
    assert.ok(b.at - a.at >= views.LABEL_PX - 1e-9, `${a.at} then ${b.at}`);
  }
  const shifted = views.axisLabels(37, 1024, 480); // first at a multiple of its step, inside the window
  const its = Math.ceil((1024 - 37) * views.LABEL_PX / 480);
  assert.strictEqual(shifted[0].index, Math.ceil(37 / its) * its);
  assert.strictEqual(shifted[1].index - shifted[0].index, its);
  assert.ok(shifted.every((l) => l.at > 0 && l.at < 480));
  assert.deepStrictEqual(views.axisLabels(5, 5, 480), []);
});
