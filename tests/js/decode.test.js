// The 8-bit attention decoding of views-core.js against an encoding written by reportgen/views.py.
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');

const views = require(path.join(__dirname, '..', '..', 'site_src', 'assets', 'javascripts', 'views-core.js'));

const MAX_ERR = 0.5 / 255;

// Made once with reportgen.views.encode_attention on ATTENTION below (shape [1 layer, 2 heads, 3, 3]).
const ENCODED = {
  encoding: 'u8-row-affine',
  shape: [1, 2, 3, 3],
  q: ['/0kkDv8O////', '/wAAf4D/AAL/'],
  floor: 'IJcCOgiG9TkAAAAAAKCqMgAAAAC4Dbk5',
  scale: 'U8YzO+QuZzvGXqs6gICAO4CAADvaV347',
};
const ATTENTION = [
  [[0.7, 0.2, 0.1], [0.05, 0.9, 0.05], [0.3333, 0.3333, 0.3334]],
  [[1.0, 0.0, 0.0], [0.25, 0.25, 0.5], [0.001, 0.009, 0.99]],
];
// reportgen.views.decode_attention(ENCODED): numpy's float64 floor + code * scale, printed with repr.
const DECODED = [
  [[0.6999999557156116, 0.20074769551865757, 0.09925135690718889],
    [0.04985435144044459, 0.8999999680090696, 0.04985435144044459],
    [0.33339998801238835, 0.33339998801238835, 0.33339998801238835]],
  [[0.9999999602587195, 1.9863364286720753e-08, 1.9863364286720753e-08],
    [0.249019593000412, 0.2509803771972656, 0.4999999701976776],
    [0.00035296170972287655, 0.008114899275824428, 0.9900000013876706]],
];

test('base64 bytes and little-endian float32 decode', () => {
  assert.deepStrictEqual(Array.from(views.base64Bytes('AAEC/w==')), [0, 1, 2, 255]);
  assert.deepStrictEqual(Array.from(views.base64Float32('AACAPwAAIMA=')), [1.0, -2.5]);
});

test('decodeRows applies floor + code * scale per row, from the given first row', () => {
  const codes = Uint8Array.from([0, 255, 10, 20]);
  const floor = Float32Array.from([9, 0.5, 0.25]); // row 0 of these belongs to another head
  const scale = Float32Array.from([9, 0.5, 0.125]);
  assert.deepStrictEqual(Array.from(views.decodeRows(codes, floor, scale, 1, 2)), [0.5, 128, 1.5, 2.75]);
});

test('Attention decodes what reportgen/views.py encoded, exactly as numpy does', () => {
  const attention = new views.Attention(ENCODED);
  assert.deepStrictEqual([attention.layers, attention.heads, attention.n], [1, 2, 3]);
  for (let head = 0; head < 2; head++) {
    const matrix = Array.from(attention.matrix(0, head));
    assert.deepStrictEqual(matrix, DECODED[head].flat());
    ATTENTION[head].flat().forEach((weight, i) => {
      assert.ok(Math.abs(matrix[i] - weight) <= MAX_ERR, `head ${head} #${i}`);
    });
    for (let row = 0; row < 3; row++) {
      const sum = matrix.slice(3 * row, 3 * row + 3).reduce((a, b) => a + b, 0);
      assert.ok(Math.abs(sum - 1) <= 0.01, `head ${head} row ${row} sums to ${sum}`);
    }
  }
});

test('Attention refuses an encoding it does not know', () => {
  assert.throws(() => new views.Attention({ ...ENCODED, encoding: 'f16' }), /unknown attention encoding: f16/);
});

test('long inputs keep only the 8 most recently used decoded heads', () => {
  const n = 320; // n * n > 100000: the limit applies
  const chunk = Buffer.alloc(n * n, 7).toString('base64');
  const rows = Buffer.alloc(4 * 10 * n).toString('base64');
  const attention = new views.Attention({ encoding: 'u8-row-affine', shape: [1, 10, n, n], q: Array(10).fill(chunk),
    floor: rows, scale: rows });
  const first = attention.matrix(0, 0);
  const second = attention.matrix(0, 1);
  for (let head = 2; head < 8; head++) attention.matrix(0, head);
  assert.strictEqual(attention.matrix(0, 0), first); // used again: now the most recent
  attention.matrix(0, 8); // the ninth head evicts the least recently used, head 1
  assert.strictEqual(attention.cache.size, 8);
  assert.strictEqual(attention.matrix(0, 0), first);
  assert.notStrictEqual(attention.matrix(0, 1), second);
});
