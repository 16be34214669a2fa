// The live view's WordPiece tokenizer (site_src/assets/javascripts/live-tokenizer.js) on a tiny hand-written
// vocabulary. tests/live/test_live_tokenizer.py compares it with Hugging Face's tokenizers on real vocabularies;
// these tests pin each step on its own. node:test and node:assert only (nothing from npm).
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const path = require('path');

const live = require(path.join(__dirname, '..', '..', 'site_src', 'assets', 'javascripts', 'live-tokenizer.js'));

const VOCAB = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', '.', ',', '!', '¿', '$', 'the', 'cat', 'sat', 'straw',
  '##berries', '##s', 'cafe', 'café', 'naive', 'a', 'b', 'c', '##a', '##b', '##c', '中', '文', 'σ', 'ς', 'hello', '🙂'];

function spec(normalizer, extra) {
  const specials = {};
  ['cls', 'sep', 'pad', 'unk', 'mask'].forEach((role) => {
    const token = '[' + role.toUpperCase() + ']';
    specials[role] = { token: token, id: VOCAB.indexOf(token) };
  });
  return Object.assign({
    version: live.SPEC_VERSION,
    vocab: VOCAB,
    normalizer: Object.assign({ clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
      normalizer || {}),
    pre_tokenizer: 'BertPreTokenizer',
    wordpiece: { unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 100 },
    added_tokens: ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'].map((token) => ({
      content: token, id: VOCAB.indexOf(token), special: true, normalized: false, lstrip: false, rstrip: false,
      single_word: false
    })),
    special_tokens: specials,
    model_max_length: 512,
    token_type_ids: true
  }, extra || {});
}

test('punctuation is a piece of its own, ASCII symbols included', () => {
  const tokenizer = live.createTokenizer(spec());
  assert.deepStrictEqual(tokenizer.tokenize('The cat,sat!¿$'), ['the', 'cat', ',', 'sat', '!', '¿', '$']);
});

test('a word splits into the longest pieces first, later ones with ##', () => {
  const tokenizer = live.createTokenizer(spec());
  assert.deepStrictEqual(tokenizer.tokenize('strawberries cats abc'),
    ['straw', '##berries', 'cat', '##s', 'a', '##b', '##c']);
});

test('a word with an unknown part, or too long, is one unknown token', () => {
  const tokenizer = live.createTokenizer(spec());
  assert.deepStrictEqual(tokenizer.tokenize('catz'), ['[UNK]']);
  assert.deepStrictEqual(tokenizer.tokenize('a'.repeat(100)), ['a'].concat(new Array(99).fill('##a')));
  assert.deepStrictEqual(tokenizer.tokenize('a'.repeat(101)), ['[UNK]']);
  // Rust counts chars: 100 emoji are 200 UTF-16 units but still within the limit of 100
  assert.deepStrictEqual(tokenizer.tokenize('🙂'.repeat(100)).length, 1);
  assert.deepStrictEqual(tokenizer.tokenize('🙂'), ['🙂']);
});

test('accents are stripped when lowercasing, unless the spec says otherwise', () => {
  assert.deepStrictEqual(live.createTokenizer(spec()).tokenize('CAFÉ Naïve'), ['cafe', 'naive']);
  assert.deepStrictEqual(live.createTokenizer(spec({ strip_accents: false })).tokenize('CAFÉ'), ['café']);
  assert.deepStrictEqual(live.createTokenizer(spec({ lowercase: false })).tokenize('café'), ['café']);
  assert.strictEqual(live.normalize('İ', { lowercase: true, strip_accents: false }), 'i\u0307');
  assert.strictEqual(live.normalize('İ', { lowercase: true, strip_accents: true }), 'i');
});

test('capital sigma lowercases to σ even at the end of a word, as Rust lowercases one char at a time', () => {
  assert.deepStrictEqual(live.createTokenizer(spec()).tokenize('Σ ΣΣ'), ['σ', '[UNK]']);
  assert.strictEqual(live.normalize('ΟΔΟΣ', { lowercase: true }), 'οδοσ');
});

test('CJK ideographs are words of their own; kana is not', () => {
  assert.deepStrictEqual(live.createTokenizer(spec()).tokenize('中文cat'), ['中', '文', 'cat']);
  assert.deepStrictEqual(live.createTokenizer(spec({ handle_chinese_chars: false })).tokenize('中文'), ['[UNK]']);
  assert.strictEqual(live.isChinese('中'.codePointAt(0)), true);
  assert.strictEqual(live.isChinese('か'.codePointAt(0)), false);
});

test('control and zero-width characters vanish; other whitespace separates', () => {
  const tokenizer = live.createTokenizer(spec());
  assert.deepStrictEqual(tokenizer.tokenize('ca\u200bt\u00ad sat\u0000\ufffd'), ['cat', 'sat']);
  assert.deepStrictEqual(tokenizer.tokenize('cat\u00a0sat\u3000the\u2028a\tb'), ['cat', 'sat', 'the', 'a', 'b']);
});

test('special tokens typed in the text stay whole, in their own case only', () => {
  const tokenizer = live.createTokenizer(spec());
  assert.deepStrictEqual(tokenizer.tokenize('the [MASK] sat[SEP]'), ['the', '[MASK]', 'sat', '[SEP]']);
  assert.deepStrictEqual(tokenizer.tokenize('[mask]'), ['[UNK]', '[UNK]', '[UNK]']); // '[', 'mask', ']'
});

test('a pair is [CLS] a [SEP] b [SEP] with token types 0 then 1', () => {
  const encoded = live.createTokenizer(spec()).encode('the cat', 'sat.');
  assert.deepStrictEqual(encoded.tokens, ['[CLS]', 'the', 'cat', '[SEP]', 'sat', '.', '[SEP]']);
  assert.deepStrictEqual(encoded.ids, [2, 10, 11, 3, 12, 5, 3]);
  assert.deepStrictEqual(encoded.segments, [0, 0, 0, 0, 1, 1, 1]);
  assert.strictEqual(encoded.truncated, false);
  assert.deepStrictEqual(live.createTokenizer(spec()).encode('cat', '').tokens, ['[CLS]', 'cat', '[SEP]']);
});

test('truncation takes tokens off the end of the longer text first', () => {
  const tokenizer = live.createTokenizer(spec());
  // 6 and 2 pieces, room for 5: the longer keeps 3, the shorter both
  let encoded = tokenizer.encode('a b c a b c', 'cat sat', 8);
  assert.deepStrictEqual(encoded.tokens, ['[CLS]', 'a', 'b', 'c', '[SEP]', 'cat', 'sat', '[SEP]']);
  assert.strictEqual(encoded.truncated, true);
  // both too long (4 and 4 pieces, room for 5): the first keeps 2, the second 3 (Rust's longest_first)
  encoded = tokenizer.encode('a b c a', 'the cat sat the', 8);
  assert.deepStrictEqual(encoded.tokens, ['[CLS]', 'a', 'b', '[SEP]', 'the', 'cat', 'sat', '[SEP]']);
  // the second longer: it is cut, and the first kept whole
  encoded = tokenizer.encode('cat', 'a b c a b c', 6);
  assert.deepStrictEqual(encoded.tokens, ['[CLS]', 'cat', '[SEP]', 'a', 'b', '[SEP]']);
  // a single text keeps maxLength - 2
  encoded = tokenizer.encode('a b c a b c', null, 4);
  assert.deepStrictEqual(encoded.tokens, ['[CLS]', 'a', 'b', '[SEP]']);
  assert.throws(() => tokenizer.encode('cat', 'sat', 4), /leaves no room/);
});

test('empty or whitespace-only text is refused with a sentence for the reader', () => {
  const tokenizer = live.createTokenizer(spec());
  ['', '   ', '\t\n', '\u3000'].forEach((text) => {
    assert.throws(() => tokenizer.encode(text), { message: 'Type a sentence: the text is empty.' });
  });
  assert.throws(() => tokenizer.encode('\u200b'), /only invisible characters/);
  assert.throws(() => tokenizer.encode('cat', '  '), { message: 'Type a sentence: the second sentence is empty.' });
});

test('a spec of another version is refused', () => {
  assert.throws(() => live.createTokenizer(spec(null, { version: 99 })), /rebuild the site/);
});

test('the special ids are the roles and special added tokens, [UNK] left as content unless it shares a role', () => {
  const ids = live.specialIds(spec());
  const flagged = Object.keys(ids).map(Number).sort((a, b) => a - b);
  assert.deepStrictEqual(flagged, ['[PAD]', '[CLS]', '[SEP]', '[MASK]'].map((t) => VOCAB.indexOf(t)).sort((a, b) => a - b));
  assert.strictEqual(ids[VOCAB.indexOf('[UNK]')], undefined);
  // GPT-2's way: one token is unknown and end of text at once; it stays special
  const shared = spec();
  shared.special_tokens.sep = { token: '[UNK]', id: VOCAB.indexOf('[UNK]') };
  assert.strictEqual(live.specialIds(shared)[VOCAB.indexOf('[UNK]')], true);
});
