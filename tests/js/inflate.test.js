// A long input's deflated chunks (reportgen/site/attention_encoding.py deflate): inflated by views-core.js with
// the DecompressionStream a browser has (Node 18+ has it too), then decoded as any chunk.
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const zlib = require('node:zlib');

const views = require(path.join(__dirname, '..', '..', 'site_src', 'assets', 'javascripts', 'views-core.js'));

const N = 300; // rows past LONG_ROW (256 keys): what the encoder compresses

// codes[r][k] = (r + k) % 3: a head the decoder must give back code for code.
function headCodes(head) {
  const codes = new Uint8Array(N * N);
  for (let i = 0; i < codes.length; i++) codes[i] = (head + Math.floor(i / N) + (i % N)) % 3;
  return codes;
}

function float32(values) {
  return Buffer.from(Float32Array.from(values).buffer);
}

function inlinePayload() {
  const q = [0, 1].map((head) => zlib.deflateSync(headCodes(head)).toString('base64'));
  const rows = Array.from({ length: 2 * N }, (_, r) => r);
  return { encoding: 'u8-row-affine', shape: [1, 2, N, N], compressed: 'deflate', q,
    floor: float32(rows.map((r) => r / 1000)).toString('base64'),
    scale: float32(rows.map(() => 0.5)).toString('base64') };
}

test('inflate gives back what zlib deflated', async () => {
  const data = Buffer.from('attention '.repeat(1000));
  assert.deepStrictEqual(Buffer.from(await views.inflate(zlib.deflateSync(data))), data);
});

test('a compressed head is loaded only once ensure has inflated it, then decodes as floor + code * scale', async () => {
  const attention = new views.Attention(inlinePayload());
  assert.strictEqual(attention.isLoaded(0, 1), false);
  assert.throws(() => attention.matrix(0, 1), /not loaded yet/);
  const note = await new Promise((resolve, reject) => {
    const said = attention.ensure([[0, 1]], (error) => (error ? reject(error) : resolve(said)));
  });
  assert.match(note, /^Decompressing layer 0 head 1/);
  assert.strictEqual(attention.isLoaded(0, 1), true);
  assert.strictEqual(attention.isLoaded(0, 0), false);
  const matrix = attention.matrix(0, 1);
  const codes = headCodes(1);
  for (const i of [0, 1, N - 1, N, N * N - 1]) {
    const row = Math.floor(i / N);
    assert.strictEqual(matrix[i], Math.fround((N + row) / 1000) + codes[i] * 0.5, `#${i}`);
  }
  assert.strictEqual(attention.ensure([[0, 1]], () => assert.fail('nothing to load')), null);
});

test('a packed chunk is deflated whole, its rows after its codes', async () => {
  const packed = Buffer.concat([Buffer.from(headCodes(0)), float32(Array(N).fill(0.25)), float32(Array(N).fill(2))]);
  const attention = new views.Attention({ encoding: 'u8-row-affine', shape: [1, 1, N, N], compressed: 'deflate',
    packed: 'codes,floor,scale', inline: { l0h0: zlib.deflateSync(packed).toString('base64') } });
  await new Promise((resolve, reject) => attention.ensure([[0, 0]], (error) => (error ? reject(error) : resolve())));
  const matrix = attention.matrix(0, 0);
  assert.deepStrictEqual([matrix[0], matrix[1], matrix[2]], [0.25, 2.25, 4.25]);
});

test('a chunk that is not zlib data is an error ensure reports, not a thrown one', async () => {
  const payload = { ...inlinePayload(), q: ['bm90IHpsaWI=', 'bm90IHpsaWI='] };
  const attention = new views.Attention(payload);
  const error = await new Promise((resolve) => attention.ensure([[0, 0]], resolve));
  assert.match(error.message, /could not be decompressed/);
  assert.strictEqual(attention.isLoaded(0, 0), false);
});

test('an unknown compression is refused', () => {
  assert.throws(() => new views.Attention({ ...inlinePayload(), compressed: 'br' }), /unknown compression: br/);
});
