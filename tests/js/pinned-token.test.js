// The links the example pages' "Patterns in this example" section writes (reportgen/report/links.py head_link with
// token= or key=): one head of the head view with one query token, or one key token, pinned.
// tests/site/test_glossary.py checks that head_link writes exactly these strings.
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');

const views = require(path.join(__dirname, '..', '..', 'site_src', 'assets', 'javascripts', 'views-core.js'));

const LIMITS = { layers: 6, heads: 12, tokens: 19 };

test('a head link with a query token pins that token (left column)', () => {
  const fields = views.parseHash('#view=head&layer=0&head=4&token=12', LIMITS);
  assert.strictEqual(fields.view, 'head');
  assert.deepStrictEqual([fields.layer, fields.heads, fields.token, fields.key], [0, [4], 12, null]);
  assert.strictEqual(views.formatHash({ view: 'head', layer: 0, head: [4], token: 12 }),
    'view=head&layer=0&head=4&token=12');
});

test('a head link with a key token pins that key (right column)', () => {
  const fields = views.parseHash('#view=head&layer=2&head=7&key=0', LIMITS);
  assert.deepStrictEqual([fields.layer, fields.heads, fields.token, fields.key], [2, [7], null, 0]);
  assert.strictEqual(views.formatHash({ view: 'head', layer: 2, head: [7], key: 0 }), 'view=head&layer=2&head=7&key=0');
});

test('a pinned token past the end of the example is dropped, the head kept', () => {
  const fields = views.parseHash('#view=head&layer=1&head=8&token=19', LIMITS);
  assert.deepStrictEqual([fields.layer, fields.heads, fields.token], [1, [8], null]);
  assert.deepStrictEqual(fields.problems, [{ field: 'token', given: '19' }]); // the view says so in its note
});
