// The deep-link format (formatHash/parseHash in views-core.js), which reportgen/site.py `head_link` mirrors.
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');

const views = require(path.join(__dirname, '..', '..', 'site_src', 'assets', 'javascripts', 'views-core.js'));

const LIMITS = { layers: 6, heads: 12, tokens: 19 };
const NOTHING = { view: null, layer: null, head: null, heads: null, token: null, key: null, filter: null, topk: null,
  min: null, mode: null, win: null, problems: [] };

test('formatHash writes the fields in a fixed order, lists with plain commas, and leaves out nulls', () => {
  const text = views.formatHash({ min: 0.02, topk: 5, filter: 'AB', key: 9, token: 4, head: [0, 3], layer: 2,
    view: 'head' });
  assert.strictEqual(text, 'view=head&layer=2&head=0,3&token=4&key=9&filter=AB&topk=5&min=0.02');
  assert.strictEqual(views.formatHash({ view: 'head', token: null, key: 9 }), 'view=head&key=9');
  assert.strictEqual(views.formatHash({ view: 'model', layer: undefined, head: [] }), 'view=model&head=');
  assert.strictEqual(views.formatHash({ view: 'qk', layer: 2, head: 5, token: 4 }), 'view=qk&layer=2&head=5&token=4');
});

test('the link reportgen/site.py head_link writes is the head view of one head', () => {
  // head_link(example, layer, head) -> example-N.html#view=head&layer={layer}&head={head}
  const fields = views.parseHash('#view=head&layer=2&head=5', LIMITS);
  assert.deepStrictEqual(fields, { ...NOTHING, view: 'head', layer: 2, head: 5, heads: [5] });
  assert.strictEqual(views.formatHash({ view: 'head', layer: 2, head: [5] }), 'view=head&layer=2&head=5');
});

test('parseHash reads back what formatHash wrote', () => {
  const state = { view: 'head', layer: 5, head: [0, 3, 11], token: null, key: 18, filter: 'BA', topk: 19, min: 0.5,
    mode: 'contributions', win: '2-9,0-18' };
  const parsed = views.parseHash('#' + views.formatHash(state), LIMITS);
  assert.deepStrictEqual(parsed, { ...state, head: null, heads: [0, 3, 11], win: { q0: 2, q1: 10, k0: 0, k1: 19 },
    problems: [] }); // a list is not one head
});

test('parseHash ignores anchors that are not ours', () => {
  for (const text of ['', '#', '#finding-ablation-whole-layers', '#a=1&b=2', 'section=3']) {
    assert.strictEqual(views.parseHash(text, LIMITS), null, text);
  }
  assert.deepStrictEqual(views.parseHash('#topk=3', LIMITS), { ...NOTHING, topk: 3 });
});

test('parseHash drops values out of range or malformed, field by field', () => {
  const parsed = views.parseHash('view=qk&layer=6&head=3,4&token=-1&key=1.5&filter=XY&topk=0&min=2', LIMITS);
  const dropped = [['layer', '6'], ['token', '-1'], ['key', '1.5'], ['filter', 'XY'], ['min', '2']]; // topk=0: no top-k
  assert.deepStrictEqual(parsed, { ...NOTHING, view: 'qk', heads: [3, 4],
    problems: dropped.map(([field, given]) => ({ field, given })) });
  const edges = views.parseHash('layer=5&head=11&token=18&key=007&topk=20&min=1', LIMITS);
  assert.deepStrictEqual(edges, { ...NOTHING, layer: 5, head: 11, heads: [11], token: 18, key: 7, min: 1,
    problems: [{ field: 'topk', given: '20' }] });
  assert.strictEqual(views.parseHash('topk=19&min=-0.1', LIMITS).topk, 19);
  assert.strictEqual(views.parseHash('topk=19&min=-0.1', LIMITS).min, null);
});

test('parseHash: head lists are distinct, sorted and in range; "heads" is another spelling', () => {
  assert.deepStrictEqual(views.parseHash('head=7,1,1,x,12,0', LIMITS).heads, [0, 1, 7]);
  assert.deepStrictEqual(views.parseHash('heads=2,1', LIMITS).heads, [1, 2]);
  assert.strictEqual(views.parseHash('heads=2', LIMITS).head, null); // the single head is read from "head" only
  assert.deepStrictEqual(views.parseHash('head=4&heads=2', LIMITS).heads, [4]);
  assert.deepStrictEqual(views.parseHash('head=', LIMITS).heads, []); // given but empty: no head selected
});

test('parseHash lists what it dropped: a head list keeps its good heads and names the bad ones', () => {
  const mixed = views.parseHash('view=head&head=3,99,x,3', LIMITS);
  assert.deepStrictEqual(mixed.heads, [3]);
  assert.deepStrictEqual(mixed.problems, [{ field: 'head', given: '99,x' }]);
  const none = views.parseHash('view=head&head=abc', LIMITS);
  assert.deepStrictEqual([none.heads, none.problems], [[], [{ field: 'head', given: 'abc' }]]);
  assert.deepStrictEqual(views.parseHash('view=head&head=', LIMITS).problems, []); // the "None" button's link
  assert.deepStrictEqual(views.parseHash('min=&topk=', LIMITS).problems, [{ field: 'topk', given: '' },
    { field: 'min', given: '' }]);
  const long = views.parseHash('layer=' + '9'.repeat(60), LIMITS).problems[0].given;
  assert.strictEqual(long.length, 24); // cut: the note quotes it
});

test('hashNote says what the link asked for, what the model has, and what the view shows instead', () => {
  const shown = { view: 'head view', layer: 0, heads: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11] };
  const note = (hash) => views.hashNote(views.parseHash(hash, LIMITS).problems, LIMITS, shown);
  assert.strictEqual(note('view=head&layer=9'),
    'The link asked for layer 9; this model has layers 0\u20135. Showing layer 0.');
  assert.strictEqual(note('view=head&head=abc'),
    'The link asked for head \u201cabc\u201d; this model has heads 0\u201311. Showing all heads.');
  assert.strictEqual(note('view=head&token=40'),
    'The link asked for token 40; this example has tokens 0\u201318. No token pinned.');
  assert.strictEqual(views.hashNote([{ field: 'view', given: 'grid' }], LIMITS, shown),
    'The link asked for the \u201cgrid\u201d view; showing the head view.');
  assert.match(note('view=head&layer=7&filter=XY&min=3'),
    /^The link asked for layer 7;.*Showing layer 0\. .*filter .*XY.*minimum weight of 3/);
  assert.strictEqual(note('view=head&layer=2&head=1,4'), ''); // nothing dropped, nothing to say
  const one = { layers: 1, heads: 1, tokens: 3 };
  assert.strictEqual(views.hashNote([{ field: 'head', given: '2' }], one, { layer: 0, heads: [0] }),
    'The link asked for head 2; this model has only head 0. Showing all heads.');
});

test('headsText names the heads a view shows', () => {
  assert.strictEqual(views.headsText([3], 12), 'head 3');
  assert.strictEqual(views.headsText([0, 3], 12), 'heads 0, 3');
  assert.strictEqual(views.headsText([], 12), 'no head');
  assert.strictEqual(views.headsText([0, 1], 2), 'all heads');
});

test('mode: contributions is written last and read back; weights is the default, left out of links', () => {
  assert.strictEqual(views.formatHash({ mode: 'contributions', token: 4, head: [3], layer: 1, view: 'head' }),
    'view=head&layer=1&head=3&token=4&mode=contributions');
  assert.strictEqual(views.formatHash({ view: 'model', mode: null }), 'view=model');
  const parsed = views.parseHash('#view=head&layer=1&head=3&token=4&mode=contributions', LIMITS);
  assert.deepStrictEqual(parsed, { ...NOTHING, view: 'head', layer: 1, head: 3, heads: [3], token: 4,
    mode: 'contributions' });
  assert.strictEqual(views.parseHash('mode=weights', LIMITS).mode, 'weights');
  assert.deepStrictEqual(views.parseHash('mode=contributions', { ...LIMITS, contributions: true }).problems, []);
});

test('a link asking for contributions a page has not, or for an unknown mode, shows weights and a note', () => {
  const without = { ...LIMITS, contributions: false };
  const shown = { view: 'head view', layer: 1, heads: [3], mode: 'weights' };
  const missing = views.parseHash('view=head&layer=1&head=3&mode=contributions', without);
  assert.deepStrictEqual([missing.mode, missing.problems], [null, [{ field: 'mode', given: 'contributions' }]]);
  assert.strictEqual(views.hashNote(missing.problems, without, shown),
    'The link asked for contributions; this page has attention weights only. Showing weights.');
  const odd = views.parseHash('view=head&mode=norms', LIMITS);
  assert.deepStrictEqual([odd.mode, odd.problems], [null, [{ field: 'mode', given: 'norms' }]]);
  assert.strictEqual(views.hashNote(odd.problems, LIMITS, shown),
    'The link asked for the mode \u201cnorms\u201d; the views show weights or contributions. Showing weights.');
  assert.strictEqual(views.parseHash('view=head&mode=weights', without).problems.length, 0);
});
