// The 8-bit attention decoding of views-core.js against an encoding written by reportgen/views.py.
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');

const views = require(path.join(__dirname, '..', '..', 'site_src', 'assets', 'javascripts', 'views-core.js'));
require(path.join(__dirname, '..', '..', 'site_src', 'assets', 'javascripts', 'views-files.js')); // DataFiles, deliver

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

// ------------------------------------------------------------ query/key layers (issue 13)

// One layer made with reportgen.views._qk_layers from the vectors in the comment (1 layer, 2 heads, 3 tokens,
// head_dim 2) and ATTENTION above as the model's weights; the expectations are numpy's decoding, printed with repr.
//   q head 0: (1, -0.5), (0.25, 2), (-3, 0)      k head 0: (2, 1), (-1, 0.25), (0, -4)
//   q head 1: (0.1, 0.2), (-0.3, 0.4), (0.5, -0.6)   k head 1: (1.5, -1.5), (0.7, 0), (-0.2, 0.9)
const QK_LAYER = '/w9AAPn/AQCA/w/AAQCgABgAAhAAOgIQgDoDGMA6AhCAOgIQADoCEAA7IJcCOgiG9TkAAAAAU8YzO+QuZzvGXqs6/0kkDv8O//////v/' +
  'AfL/qh4A/x8A/w+AOfb/aubMOGrmTDnQrJk5AxhAOpxJszk2g+Y5AKCqMgAAAAC4Dbk5gICAO4CAADvaV347/wAAf4D/AAL/';
const QK_QUERIES = [
  [0.9999999998835847, -0.5002442598342896, 0.2501221299171448, 1.9999999997671694, -2.999999999650754, 0.0],
  [0.09995115098718088, 0.20000000593427103, -0.2999511569214519, 0.40000001186854206, 0.5000488916411996,
    -0.6000000475905836],
];
const QK_KEYS = [
  [1.9999999997671694, 1.000488519668579, -0.9999999998835847, 0.2501221299171448, 0.0, -3.9999999995343387],
  [1.499999999825377, -1.499999999825377, 0.6999999760882929, 0.0, -0.2000488413614221, 0.8999999522347935],
];

test('unpack12 reads two signed 12-bit codes from three bytes, as reportgen/views.py pack12 writes them', () => {
  // pack12([-2047, 2047, 0, -1]) in Python
  assert.deepStrictEqual(Array.from(views.unpack12(Uint8Array.from([1, 240, 255, 0, 248, 127]), 0, 4)), [-2047, 2047, 0, -1]);
  assert.deepStrictEqual(Array.from(views.unpack12(Uint8Array.from([9, 1, 240, 255]), 1, 2)), [-2047, 2047]);
});

test('decodeQKLayer gives the vectors and the model weights exactly as numpy decodes them', () => {
  const heads = views.decodeQKLayer(QK_LAYER, 2, 3, 2);
  assert.strictEqual(heads.length, 2);
  for (let head = 0; head < 2; head++) {
    assert.deepStrictEqual(Array.from(heads[head].q), QK_QUERIES[head]);
    assert.deepStrictEqual(Array.from(heads[head].k), QK_KEYS[head]);
    assert.deepStrictEqual(Array.from(heads[head].model), DECODED[head].flat());
  }
  // each component within half a step (max |v| / 4094) of the vector it came from
  assert.ok(Math.abs(heads[0].q[1] - -0.5) <= 2 / 4094 && Math.abs(heads[1].k[5] - 0.9) <= 1.5 / 4094);
});

test('decodeQKLayer refuses data of the wrong size', () => {
  assert.throws(() => views.decodeQKLayer(QK_LAYER, 2, 3, 3), /query\/key data of 150 bytes, not 168/);
});

test('decodeQKLayer without weights (a single-file view) takes each head\'s from modelOf', () => {
  const bytes = Buffer.from(QK_LAYER, 'base64');
  const full = 3 * 3 * 2 + 16 * 3 + 9; // one head's block: codes, four scale rows, weights
  const lean = Buffer.concat([0, 1].map((head) => bytes.subarray(head * full, head * full + 3 * 3 * 2 + 8 * 3)));
  const asked = [];
  const heads = views.decodeQKLayer(lean.toString('base64'), 2, 3, 2, (head) => { asked.push(head); return 'w' + head; });
  assert.deepStrictEqual(asked, [0, 1]);
  for (let head = 0; head < 2; head++) {
    assert.deepStrictEqual(Array.from(heads[head].q), QK_QUERIES[head]);
    assert.deepStrictEqual(Array.from(heads[head].k), QK_KEYS[head]);
    assert.strictEqual(heads[head].model, 'w' + head);
  }
  assert.throws(() => views.decodeQKLayer(QK_LAYER, 2, 3, 2, () => null), /query\/key data of 150 bytes, not 84/);
});

test('NormContributions: shares A[i, j] n[j] / sum_k A[i, k] n[k] of the decoded weights, and the row totals', () => {
  const att = new views.Attention(ENCODED);
  const norms = [1, 2, 4, 0, 0, 0]; // head 0: keys weighted 1, 2, 4; head 1: nothing to pass on
  const encoded = { encoding: 'norms-f32', shape: [1, 2, 3], norms: Buffer.from(Float32Array.from(norms).buffer).toString('base64') };
  const contrib = new views.NormContributions(att, encoded);
  for (let i = 0; i < 3; i++) {
    const row = DECODED[0][i];
    const total = row[0] * 1 + row[1] * 2 + row[2] * 4;
    assert.ok(Math.abs(contrib.rowTotals(0, 0)[i] - total) < 1e-6);
    const shares = Array.from(contrib.matrix(0, 0).slice(3 * i, 3 * i + 3));
    shares.forEach((share, k) => assert.ok(Math.abs(share - row[k] * [1, 2, 4][k] / total) < 1e-12));
  }
  // a row whose keys all have norm 0 keeps its weights as shares (reportgen/runs.py shares)
  assert.deepStrictEqual(Array.from(contrib.matrix(0, 1)), DECODED[1].flat());
  assert.deepStrictEqual(Array.from(contrib.rowTotals(0, 1)), [0, 0, 0]);
  assert.throws(() => new views.NormContributions(att, { encoding: 'norms-f16' }), /unknown contribution encoding/);
});

// ------------------------------------------------------------ data files (issue 13)

test('attention in data files: nothing to draw until its file delivers it, then the same decoding', () => {
  const { q, ...rest } = ENCODED;
  const files = { key: 'example-99', urls: { l0h0: 'example-99-data/l0h0.js', l0h1: 'example-99-data/l0h1.js' }, bytes: 80 };
  const attention = new views.Attention({ ...rest, files });
  assert.strictEqual(attention.isLoaded(0, 1), false);
  assert.throws(() => attention.matrix(0, 1), /layer 0 head 1 is not loaded yet/);
  views.deliver('example-98', 'l0h1', q[1]); // another page's data does not count
  assert.strictEqual(attention.isLoaded(0, 1), false);
  views.deliver('example-99', 'l0h1', q[1]);
  assert.strictEqual(attention.isLoaded(0, 1), true);
  assert.strictEqual(attention.ensure([[0, 1]], () => assert.fail('nothing to load')), null);
  assert.deepStrictEqual(Array.from(attention.matrix(0, 1)), DECODED[1].flat());
  let done = null;
  attention.request([[0, 1]], (error) => { done = error; }); // all there: answers at once, without loading
  assert.strictEqual(done, null);
});

test('loading notes quote what loads and its size', () => {
  assert.strictEqual(views.sizeText(350000), '350 KB');
  assert.strictEqual(views.sizeText(25200000), '25.2 MB');
  assert.strictEqual(views.sizeText(12), '1 KB');
});

// ------------------------------------------------------------ contributions (issue 14)

// reportgen.views.encode_contributions(ATTENTION above, value norms [[0.5, 2, 1], [0.1, 3, 0]]): the per-row
// shares of ||A[i, j] f(x_j)|| in the attention encoding, plus each row's total; CONTRIB_PACKED is
// reportgen.view_files.pack_contributions of it (one chunk per head: codes, floor, scale, total).
const CONTRIB = {
  encoding: 'u8-row-affine',
  shape: [1, 2, 3, 3],
  q: ['3/9AA/UHQP9/', '/wAACPcAAf8A'],
  floor: 'AAAAAMDtKzkAAAAAAKCqMsD6HjkAAAAA',
  scale: '0+LxOghggDvH2BI7gICAO0ddgDscB4A7',
  total: 'mplZPwAA8D/KVJU/zczMPWZmRj/RAN48',
};
const CONTRIB_PACKED = ['3/9AA/UHQP9/AAAAAMDtKzkAAAAA0+LxOghggDvH2BI7mplZPwAA8D/KVJU/',
  '/wAACPcAAf8AAKCqMsD6HjkAAAAAgICAO0ddgDscB4A7zczMPWZmRj/RAN48'];
// reportgen.views.decode_contributions(CONTRIB), printed with repr
const SHARES = [
  [0.41153400542680174, 0.47058821248356253, 0.11810841411352158, 0.011917057447135448, 0.9599999291822314,
    0.027587848715484142, 0.14340506494045258, 0.5713795556221157, 0.2845694257412106],
  [0.9999999602587195, 1.9863364286720753e-08, 1.9863364286720753e-08, 0.0314905708655715, 0.967741887550801,
    0.00015161465853452682, 0.0039070975035429, 0.9963098634034395, 0.0],
];
const TOTALS = [[0.8500000238418579, 1.875, 1.1666500568389893], [0.10000000149011612, 0.7749999761581421,
  0.02709999866783619]];

test('contributions decode as attention does, with each row\u2019s total', () => {
  const contributions = new views.Attention(CONTRIB, 'c-');
  for (let head = 0; head < 2; head++) {
    assert.deepStrictEqual(Array.from(contributions.matrix(0, head)), SHARES[head]);
    assert.deepStrictEqual(Array.from(contributions.rowTotals(0, head)), TOTALS[head]);
  }
  // share * total is ||A f|| = weight * ||f||: head 0, query 0, key 1 is 0.2 * 2.0
  assert.ok(Math.abs(contributions.matrix(0, 0)[1] * contributions.rowTotals(0, 0)[0] - 0.4) <= 0.85 * MAX_ERR);
  assert.strictEqual(new views.Attention(ENCODED).rowTotals(0, 0), null); // attention has no totals
});

test('contributions in data files: their own chunks (c-l<L>h<H>), packed with their rows, loaded on demand', () => {
  const urls = { 'c-l0h0': 'example-97-data/c-l0h0.js', 'c-l0h1': 'example-97-data/c-l0h1.js' };
  const packed = { encoding: 'u8-row-affine', shape: [1, 2, 3, 3], packed: 'codes,floor,scale,total',
    files: { key: 'example-97', urls, bytes: 120 } };
  const contributions = new views.Attention(packed, 'c-');
  assert.strictEqual(contributions.isLoaded(0, 0), false);
  views.deliver('example-97', 'l0h0', CONTRIB_PACKED[0]); // the attention's chunk name is not the contributions'
  assert.strictEqual(contributions.isLoaded(0, 0), false);
  let requested = null; // DataFiles adds <script> elements, which Node has not: note what it is asked for
  contributions.files.request = (chunks) => { requested = chunks; };
  assert.match(contributions.ensure([[0, 0]], () => {}), /^Loading the contributions of layer 0 head 0 \(1 KB\)/);
  assert.deepStrictEqual(requested, ['c-l0h0']);
  views.deliver('example-97', 'c-l0h0', CONTRIB_PACKED[0]);
  views.deliver('example-97', 'c-l0h1', CONTRIB_PACKED[1]);
  for (let head = 0; head < 2; head++) {
    assert.deepStrictEqual(Array.from(contributions.rowTotals(0, head)), TOTALS[head]); // before the matrix, too
    assert.deepStrictEqual(Array.from(contributions.matrix(0, head)), SHARES[head]);
  }
  assert.throws(() => new views.Attention({ ...packed, packed: 'codes,total' }), /unknown packing/);
  views.deliver('example-96', 'c-l0h0', CONTRIB_PACKED[0].slice(0, 8));
  const short = new views.Attention({ ...packed, files: { key: 'example-96', urls, bytes: 1 } }, 'c-');
  assert.throws(() => short.matrix(0, 0), /a head's data of 6 bytes for 3 x 3 tokens/);
});
