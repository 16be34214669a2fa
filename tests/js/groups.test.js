// An encoder-decoder's groups in views-core.js: the `attn` field of the deep link (hashGroup, parseHash,
// formatHash), the group a payload draws (groupOf) and the rectangular decoding of cross-attention.
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');

const views = require(path.join(__dirname, '..', '..', 'site_src', 'assets', 'javascripts', 'views-core.js'));

const GROUPS = ['encoder', 'decoder', 'cross'];
const LIMITS = { layers: 2, heads: 4, tokens: 20, keys: 13, contributions: true, groups: GROUPS };

test('hashGroup reads the attn field when it names one of the groups, else null', () => {
  assert.strictEqual(views.hashGroup('#view=head&attn=cross&layer=1', GROUPS), 'cross');
  assert.strictEqual(views.hashGroup('attn=decoder', GROUPS), 'decoder');
  assert.strictEqual(views.hashGroup('#view=head&attn=Cross', GROUPS), null);
  assert.strictEqual(views.hashGroup('#view=head', GROUPS), null);
  assert.strictEqual(views.hashGroup('#attn=encoder', []), null);
});

test('formatHash writes attn right after the view, and parseHash reads it back', () => {
  const text = views.formatHash({ view: 'head', attn: 'cross', layer: 1, head: [2], key: 12 });
  assert.strictEqual(text, 'view=head&attn=cross&layer=1&head=2&key=12');
  const fields = views.parseHash('#' + text, LIMITS);
  assert.strictEqual(fields.attn, 'cross');
  assert.strictEqual(fields.key, 12);
  assert.deepStrictEqual(fields.problems, []);
  assert.strictEqual(views.formatHash({ view: 'head', attn: null, layer: 0 }), 'view=head&layer=0');
});

test('parseHash checks keys against the group\'s keys and tokens against its queries', () => {
  const fields = views.parseHash('#view=head&attn=cross&token=19&key=13&topk=13', LIMITS);
  assert.strictEqual(fields.token, 19);
  assert.strictEqual(fields.key, null); // 13 source tokens: keys 0-12
  assert.strictEqual(fields.topk, 13);
  assert.deepStrictEqual(fields.problems, [{ field: 'key', given: '13' }]);
});

test('an unknown attn is dropped with a note that names the groups', () => {
  const fields = views.parseHash('#view=head&attn=memory', LIMITS);
  assert.strictEqual(fields.attn, null);
  assert.deepStrictEqual(fields.problems, [{ field: 'attn', given: 'memory' }]);
  assert.strictEqual(views.hashNote(fields.problems, LIMITS, { attn: 'encoder' }),
    'The link asked for the \u201cmemory\u201d attention; this model has encoder, decoder, cross. Showing the encoder.');
  assert.strictEqual(views.parseHash('#attn=cross', LIMITS).attn, 'cross'); // attn alone is a link of ours
});

test('without groups, parseHash gives no attn field and ignores one', () => {
  const limits = { layers: 6, heads: 12, tokens: 19 };
  const fields = views.parseHash('#view=head&attn=cross&layer=2', limits);
  assert.ok(!('attn' in fields));
  assert.deepStrictEqual(fields.problems, []);
  assert.strictEqual(views.parseHash('#attn=cross', limits), null);
});

test('groupOf gives a payload\'s own tokens on both sides where it has no groups', () => {
  const data = { tokens: ['a', 'b'], special: [1, 0], attention: { shape: [1, 1, 2, 2] }, contributions: undefined };
  assert.deepStrictEqual(views.groupOf(data, 'cross'), {
    name: null, queries: ['a', 'b'], keys: ['a', 'b'], querySpecial: [1, 0], keySpecial: [1, 0],
    attention: data.attention, contributions: undefined, causal: false,
  });
  assert.strictEqual(views.groupOf({ ...data, causal: true }, null).causal, true); // a decoder's payload
});

test('groupOf reads an encoder-decoder\'s groups, the encoder from the top level', () => {
  const top = { shape: [1, 1, 2, 2] };
  const cross = { shape: [1, 1, 3, 2] };
  const data = {
    tokens: ['s0', 's1'], special: [0, 1], attention: top, contributions: { norms: 'top' },
    groups: [
      { name: 'encoder', queries: ['s0', 's1'], keys: ['s0', 's1'], query_special: [0, 1], key_special: [0, 1] },
      { name: 'decoder', queries: ['d0', 'd1', 'd2'], keys: ['d0', 'd1', 'd2'], query_special: [1, 0, 0],
        key_special: [1, 0, 0], causal: true, attention: { shape: [1, 1, 3, 3] } },
      { name: 'cross', queries: ['d0', 'd1', 'd2'], keys: ['s0', 's1'], query_special: [1, 0, 0], key_special: [0, 1],
        attention: cross, contributions: { norms: 'cross' } },
    ],
  };
  assert.strictEqual(views.groupOf(data, null).attention, top);
  assert.deepStrictEqual(views.groupOf(data, 'encoder').contributions, { norms: 'top' });
  const got = views.groupOf(data, 'cross');
  assert.deepStrictEqual([got.queries, got.keys, got.attention, got.causal], [['d0', 'd1', 'd2'], ['s0', 's1'], cross, false]);
  assert.strictEqual(views.groupOf(data, 'decoder').causal, true);
  assert.strictEqual(views.groupOf(data, 'decoder').contributions, undefined);
  assert.strictEqual(views.groupOf(data, 'nothing').name, 'encoder');
});

function base64Of(bytes) {
  return Buffer.from(bytes).toString('base64');
}

function float32Base64(values) {
  return base64Of(new Uint8Array(new Float32Array(values).buffer));
}

test('decodeRows, Attention and NormContributions decode a rectangular head row by row', () => {
  // 2 queries over 3 keys: rows [0.2, 0.3, 0.5] and [1, 0, 0] as codes with floor 0 and scale 0.1 / 0.01
  const codes = [2, 3, 5, 100, 0, 0];
  const rows = views.decodeRows(codes, [0, 0], [0.1, 0.01], 0, 2, 3);
  assert.deepStrictEqual(Array.from(rows, (w) => +w.toFixed(6)), [0.2, 0.3, 0.5, 1, 0, 0]);
  const encoded = { encoding: 'u8-row-affine', shape: [1, 1, 2, 3], q: [base64Of(codes)],
    floor: float32Base64([0, 0]), scale: float32Base64([0.1, 0.01]) };
  const att = new views.Attention(encoded);
  assert.deepStrictEqual([att.n, att.m], [2, 3]);
  assert.strictEqual(att.matrix(0, 0).length, 6);
  const contrib = new views.NormContributions(att, { encoding: 'norms-f32', shape: [1, 1, 3],
    norms: float32Base64([1, 2, 0]) });
  const shares = Array.from(contrib.matrix(0, 0), (w) => +w.toFixed(5));
  const total = 0.2 * 1 + 0.3 * 2; // the third key passes nothing on
  assert.deepStrictEqual(shares, [+(0.2 / total).toFixed(5), +(0.6 / total).toFixed(5), 0, 1, 0, 0]);
  assert.deepStrictEqual(Array.from(contrib.rowTotals(0, 0), (t) => +t.toFixed(5)), [+total.toFixed(5), 1]);
});
