// A site's split payload in views-core.js: which data file holds a chunk, packed chunks (each head with its
// own floor, scale and totals: reportgen/site/view_files.py pack_heads), inline chunks, and DataFiles loading
// each file once however many chunks it holds. A stub `document` stands for the page: scripts added to its
// head run when the test says so.
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');

const views = require(path.join(__dirname, '..', '..', 'site_src', 'assets', 'javascripts', 'views-core.js'));
require(path.join(__dirname, '..', '..', 'site_src', 'assets', 'javascripts', 'views-files.js')); // DataFiles, deliver

// decode.test.js's ENCODED (reportgen.views.encode_attention, [1 layer, 2 heads, 3, 3]), and
// reportgen.site.view_files.pack_heads of it: each head's codes, then its rows' floor and scale.
const ENCODED = {
  encoding: 'u8-row-affine',
  shape: [1, 2, 3, 3],
  q: ['/0kkDv8O////', '/wAAf4D/AAL/'],
  floor: 'IJcCOgiG9TkAAAAAAKCqMgAAAAC4Dbk5',
  scale: 'U8YzO+QuZzvGXqs6gICAO4CAADvaV347',
};
const PACKED = ['/0kkDv8O////IJcCOgiG9TkAAAAAU8YzO+QuZzvGXqs6', '/wAAf4D/AAL/AKCqMgAAAAC4Dbk5gICAO4CAADvaV347'];
// Contributions of one rectangular head (2 queries over 3 keys), packed with their totals, and what
// reportgen.views.decode_attention / the float32 totals give for them.
const CONTRIB_PACKED = 'Zjr/aEH/AAAAAMDnwzl8yh07jWQaO0jbJT8S+Sc/';
const CONTRIB_SHARES = [0.24558528698980808, 0.13964653573930264, 0.6139632174745202,
  0.24538172781467438, 0.1535037022549659, 0.6011145960073918];
const CONTRIB_TOTALS = [0.6478772163391113, 0.6561442613601685];

// A stand-in for the page: records the <script> elements added; run(url) delivers and fires onload.
function stubPage() {
  const added = [];
  global.document = {
    createElement: () => ({ remove() {} }),
    head: { appendChild: (script) => added.push(script) },
  };
  return added;
}

test('fileOf: a per-layer file holds every head of its layer; otherwise each chunk has its own', () => {
  assert.strictEqual(views.fileOf('l3h11', 'layer'), 'l3');
  assert.strictEqual(views.fileOf('c-l0h2', 'layer'), 'c-l0');
  assert.strictEqual(views.fileOf('l3h11', null), 'l3h11');
  assert.strictEqual(views.fileOf('qk-l4', undefined), 'qk-l4');
  assert.deepStrictEqual(views.filesOf(['l1h0', 'l1h1', 'l2h0', 'l1h2'], 'layer'), ['l1', 'l2']);
  assert.deepStrictEqual(views.filesOf(['c-l0h0', 'c-l0h1'], null), ['c-l0h0', 'c-l0h1']);
});

test('packed chunks decode exactly as the inline encoding does', () => {
  const inline = new views.Attention(ENCODED);
  const packed = new views.Attention({ encoding: 'u8-row-affine', shape: [1, 2, 3, 3], packed: 'codes,floor,scale',
    inline: { l0h0: PACKED[0], l0h1: PACKED[1] } });
  for (let head = 0; head < 2; head++) {
    assert.ok(packed.isLoaded(0, head));
    assert.deepStrictEqual(Array.from(packed.matrix(0, head)), Array.from(inline.matrix(0, head)));
    assert.strictEqual(packed.rowTotals(0, head), null); // weights have no totals
  }
  assert.strictEqual(packed.ensure([[0, 0], [0, 1]], () => assert.fail('nothing to load')), null);
});

test('unpackHead splits a packed contributions chunk into floor, scale and totals; rectangular heads too', () => {
  const bytes = views.base64Bytes(CONTRIB_PACKED);
  const rows = views.unpackHead(bytes, 2, 3, 3);
  assert.strictEqual(rows.length, 3);
  assert.deepStrictEqual(Array.from(rows[2]), CONTRIB_TOTALS);
  assert.throws(() => views.unpackHead(bytes, 3, 3, 3), /bytes for 3 x 3 tokens/);
  const contrib = new views.Attention({ encoding: 'u8-row-affine', shape: [1, 1, 2, 3],
    packed: 'codes,floor,scale,total', inline: { 'c-l0h0': CONTRIB_PACKED } }, 'c-');
  assert.deepStrictEqual(Array.from(contrib.matrix(0, 0)), CONTRIB_SHARES);
  assert.deepStrictEqual(Array.from(contrib.rowTotals(0, 0)), CONTRIB_TOTALS);
  assert.throws(() => new views.Attention({ encoding: 'u8-row-affine', shape: [1, 1, 2, 3], packed: 'codes' }),
    /unknown packing/);
});

test('a per-layer data file is loaded once for all the heads it holds, and a second request loads nothing', () => {
  const added = stubPage();
  const spec = { key: 'page-a', urls: { l1: 'd/l1.js', l2: 'd/l2.js' }, per: 'layer', bytes: 2000 };
  const attention = new views.Attention({ encoding: 'u8-row-affine', shape: [3, 2, 3, 3], packed: 'codes,floor,scale',
    inline: { l0h0: PACKED[0], l0h1: PACKED[1] }, files: spec });
  assert.ok(attention.isLoaded(0, 1) && !attention.isLoaded(1, 0));
  let calls = 0;
  const note = attention.ensure([[1, 0], [1, 1]], (error) => { assert.strictEqual(error, null); calls++; });
  assert.strictEqual(note, 'Loading 2 heads (2 KB)\u2026'); // one file of ~2 KB, not two
  // the contributions switch or the model view asking meanwhile joins the same load
  const again = new views.DataFiles(spec);
  again.request(['l1h1'], (error) => { assert.strictEqual(error, null); calls++; });
  assert.deepStrictEqual(added.map((script) => script.src), ['d/l1.js']);
  views.deliver('page-a', 'l1h0', PACKED[0]);
  views.deliver('page-a', 'l1h1', PACKED[1]);
  added[0].onload();
  assert.strictEqual(calls, 2);
  assert.deepStrictEqual(Array.from(attention.matrix(1, 1)), Array.from(new views.Attention(ENCODED).matrix(0, 1)));
  assert.strictEqual(attention.ensure([[1, 0], [1, 1]], () => assert.fail('loaded already')), null);
  assert.strictEqual(added.length, 1);
});

test('a file that delivers less than asked, or fails, is an error for the view to say', () => {
  const added = stubPage();
  const files = new views.DataFiles({ key: 'page-b', urls: { 'c-l0': 'd/c-l0.js' }, per: 'layer', bytes: 10 });
  const errors = [];
  files.request(['c-l0h0', 'c-l0h1'], (error) => errors.push(error && error.message));
  views.deliver('page-b', 'c-l0h0', 'AAAA');
  added[0].onload();
  assert.deepStrictEqual(errors, ['d/c-l0.js held no data for c-l0h1']);
  files.request(['c-l0h1'], (error) => errors.push(error && error.message));
  added[1].onerror();
  assert.deepStrictEqual(errors.slice(1), ['The data file d/c-l0.js could not be loaded.']);
  files.request(['c-l5h0'], (error) => errors.push(error && error.message));
  assert.strictEqual(errors[2], 'this page lists no data file for c-l5');
});
