/*
 * reportgen live view, the tokenizer: BERT's WordPiece tokenizer in the browser, so that a reader's own sentence
 * gets the same token ids as Hugging Face's fast tokenizer gives it in Python.
 *
 * Written for reportgen (no third-party code), after the BERT paper (Devlin et al. 2019) and the behaviour of the
 * `tokenizers` library's BertNormalizer, BertPreTokenizer and WordPiece model, probed from Python where the docs
 * are silent (tests/live/test_live_tokenizer.py compares the two on thousands of strings). The settings come from
 * reportgen/live/tokenizer.py `tokenizer_spec`, as JSON; this file holds no vocabulary of its own.
 *
 * A classic script, not an ES module: it loads in a page opened from file://, in a Web Worker made from a Blob,
 * and in Node (tests/js/), and exports `reportgenLiveTokenizer` (browser, worker) or module.exports (Node):
 *   createTokenizer(spec) -> { tokenize(text) -> pieces, encode(text, pair, maxLength) -> { ids, tokens,
 *                              segments, truncated }, idToToken(id), tokenToId(token) }
 *
 * The pipeline, in the Rust code's order:
 *   1. added tokens ([CLS], [MASK], ... as the spec lists them) are cut out of the raw text first, so a reader who
 *      types [MASK] gets the mask token, as in Python;
 *   2. BertNormalizer on the rest: drop NUL, U+FFFD and "other" characters (Cc, Cf, Co; \t \n \r are whitespace),
 *      turn whitespace into ' ', put spaces around CJK ideographs, strip accents (NFD, drop Mn), lowercase;
 *   3. BertPreTokenizer: split on whitespace and isolate each punctuation character;
 *   4. WordPiece: greedy longest-match-first, later pieces carry the '##' prefix; a word with a piece that is not in
 *      the vocabulary, or longer than max_input_chars_per_word, is one unknown token.
 * Everything walks the text by code point (Array.from, codePointAt), never by UTF-16 unit: Rust counts chars
 * (Unicode scalar values), and an emoji is one char there but two units here.
 */
(function (root) {
  'use strict';

  var SPEC_VERSION = 1; // reportgen/live/tokenizer.py SPEC_VERSION

  // Rust's char::is_whitespace is Unicode's White_Space property (not just category Zs: it has \t \n \r,
  // U+0085, U+2028, U+2029 too). JavaScript's \s differs (it has U+FEFF), so the property is named.
  var WHITESPACE = /^\p{White_Space}$/u;
  // BertNormalizer's is_control: Rust's unicode_categories "is_other" as the tokenizers crate uses it drops
  // Cc, Cf and Co (private use) but keeps unassigned code points (Cn) -- probed: U+0378 survives, U+E000 does not.
  var OTHER = /^[\p{Cc}\p{Cf}\p{Co}]$/u;
  // Rust's is_punctuation is Unicode's P* categories; BERT adds ASCII symbols such as $ + < = > ^ ` | ~ below.
  var PUNCTUATION = /^\p{P}$/u;
  var NONSPACING_MARK = /^\p{Mn}$/u;
  // Rust regex's \w is Unicode-aware (JavaScript's is ASCII only even with the u flag): used for single_word tokens.
  var WORD_CHAR = /^[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]$/u;

  // The tokenizers crate classifies characters with the unicode_categories crate, whose tables are Unicode 8.0
  // (2015); this engine's \p{...} are much newer. Below, as hexadecimal code points and ranges, is every code
  // point where the two disagree with Node 20's Unicode 17, stated as what Rust does (so it holds in an engine of
  // any Unicode version for these code points): mostly characters added since, which Rust leaves as plain letters.
  // tests/live/test_live_tokenizer.py classifies every code point both ways and names any new disagreement.
  function codePoints(text) {
    var set = {};
    text.split(' ').forEach(function (item) {
      var ends = item.split('-');
      var last = parseInt(ends[ends.length - 1], 16);
      for (var cp = parseInt(ends[0], 16); cp <= last; cp++) set[cp] = true;
    });
    return set;
  }
  // Format characters Rust does not know (Unicode 14/15: Arabic pound mark above, Egyptian hieroglyph controls...):
  // it keeps them, so they become part of a word (and usually an unknown token).
  var KEEP = codePoints('890-891 8e2 110cd 13430-1343f');
  // Punctuation Rust does not split on (added since Unicode 8), and two it does split on that are no longer P*.
  var NOT_PUNCTUATION = codePoints('61d 9fd a76 c77 c84 1b4e-1b4f 1b7d-1b7f 2e43-2e4f 2e52-2e5d 10d6e 10ead ' +
    '10ed0 10f55-10f59 10f86-10f89 113d4-113d5 113d7-113d8 1144b-1144f 1145a-1145b 1145d 11660-1166c 116b9 1183b ' +
    '11944-11946 119e2 11a3f-11a46 11a9a-11a9c 11a9e-11aa2 11b00-11b09 11be1 11c41-11c45 11c70-11c71 11ef7-11ef8 ' +
    '11f43-11f4f 11fff 12ff1-12ff2 16d6d-16d6f 16e97-16e9a 16fe2 1e5ff 1e95e-1e95f');
  var IS_PUNCTUATION = codePoints('166d 111c9');
  // Nonspacing marks Rust's accent stripping keeps (added since Unicode 8), and two it drops that are now Mc.
  var NOT_MARK = codePoints('7fd 897-89f 8ca-8e1 9fe afa-aff b55 c04 c3c d00 d3b-d3c d81 eba ece 180f 1885-1886 ' +
    '1abf-1add 1ae0-1aeb 1df6-1dfb a82c a8c5 a8ff a9bd 10d24-10d27 10d69-10d6d 10eab-10eac 10efa-10eff ' +
    '10f46-10f50 10f82-10f85 11070 11073-11074 110c2 111c9 111cf 1123e 11241 1133b 113bb-113c0 113ce 113d0 113d2 ' +
    '113e1-113e2 11438-1143f 11442-11444 11446 1145e 1182f-11837 11839-1183a 1193b-1193c 1193e 11943 ' +
    '119d4-119d7 119da-119db 119e0 11a01-11a0a 11a33-11a38 11a3b-11a3e 11a47 11a51-11a56 11a59-11a5b ' +
    '11a8a-11a96 11a98-11a99 11b60 11b62-11b64 11b66 11c30-11c36 11c38-11c3d 11c3f 11c92-11ca7 11caa-11cb0 ' +
    '11cb2-11cb3 11cb5-11cb6 11d31-11d36 11d3a 11d3c-11d3d 11d3f-11d45 11d47 11d90-11d91 11d95 11d97 ' +
    '11ef3-11ef4 11f00-11f01 11f36-11f3a 11f40 11f42 11f5a 13440 13447-13455 1611e-16129 1612d-1612f ' +
    '16f4f 16fe4 1cf00-1cf2d 1cf30-1cf46 1e000-1e006 1e008-1e018 1e01b-1e021 1e023-1e024 1e026-1e02a 1e08f ' +
    '1e130-1e136 1e2ae 1e2ec-1e2ef 1e4ec-1e4ef 1e5ee-1e5ef 1e6e3 1e6e6 1e6ee-1e6ef 1e6f5 1e944-1e94a');
  var IS_MARK = codePoints('1734 1171e');
  // Characters Rust's NFD leaves whole (their decompositions are newer than its tables).
  var NO_DECOMPOSITION = codePoints('105c9 105e4 11383 11385 1138e 11391 113c5 113c7 113c8 11938 16121-16128 ' +
    '16d68-16d6a');

  function isWhitespace(ch) {
    return ch === '\t' || ch === '\n' || ch === '\r' || WHITESPACE.test(ch);
  }

  function isControl(ch, cp) {
    if (ch === '\t' || ch === '\n' || ch === '\r') return false; // whitespace to BERT, not control
    return !KEEP[cp] && OTHER.test(ch);
  }

  // BERT's _is_chinese_char: the CJK Unified Ideographs blocks (not Japanese kana or Korean Hangul, which are
  // written with spaces and handled like any other letters). Probed from the Rust code at each range's ends.
  function isChinese(cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
      (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
      (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
  }

  function isPunctuation(ch, cp) {
    // ASCII punctuation by BERT's definition: every non-letter, non-digit printable ASCII character.
    if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126)) {
      return true;
    }
    if (NOT_PUNCTUATION[cp]) return false;
    return IS_PUNCTUATION[cp] === true || PUNCTUATION.test(ch);
  }

  function isNonspacingMark(ch) {
    var cp = ch.codePointAt(0);
    if (NOT_MARK[cp]) return false;
    return IS_MARK[cp] === true || NONSPACING_MARK.test(ch);
  }

  // Canonical decomposition as Rust's unicode-normalization crate does it: the text's NFD, except that the few
  // characters it has no decomposition for stay whole (the text is decomposed around them).
  function nfd(text) {
    var out = '';
    var run = '';
    Array.from(text).forEach(function (ch) {
      if (NO_DECOMPOSITION[ch.codePointAt(0)]) {
        out += run.normalize('NFD') + ch;
        run = '';
      } else {
        run += ch;
      }
    });
    return out + run.normalize('NFD');
  }

  function isWordChar(ch) {
    return WORD_CHAR.test(ch);
  }

  // ---------------------------------------------------------------- BertNormalizer

  // `settings` is the spec's normalizer: clean_text, handle_chinese_chars, strip_accents (null: follow
  // lowercase, as Rust's strip_accents.unwrap_or(lowercase)), lowercase. Steps run in the Rust code's order:
  // accents are stripped before lowercasing, so 'İ' becomes 'I' then 'i' (not 'i' + U+0307).
  function normalize(text, settings) {
    var out = [];
    var chars = Array.from(text);
    for (var i = 0; i < chars.length; i++) {
      var ch = chars[i];
      var cp = ch.codePointAt(0);
      if (settings.clean_text) {
        if (cp === 0 || cp === 0xFFFD || isControl(ch, cp)) continue;
        if (isWhitespace(ch)) ch = ' ';
      }
      if (settings.handle_chinese_chars && isChinese(cp)) {
        out.push(' ', ch, ' ');
      } else {
        out.push(ch);
      }
    }
    var result = out.join('');
    var strip = settings.strip_accents === null || settings.strip_accents === undefined ?
      settings.lowercase : settings.strip_accents;
    if (strip) {
      result = Array.from(nfd(result)).filter(function (c) { return !isNonspacingMark(c); }).join('');
    }
    if (settings.lowercase) {
      // One character at a time: Rust's char::to_lowercase has no context, while String.prototype.toLowerCase
      // on a whole string turns a word-final capital sigma into 'ς' (Rust gives 'σ').
      result = Array.from(result).map(function (c) { return c.toLowerCase(); }).join('');
    }
    return result;
  }

  // ---------------------------------------------------------------- BertPreTokenizer

  // Words: runs of characters between whitespace, with every punctuation character a word of its own.
  function preTokenize(text) {
    var words = [];
    var current = '';
    var chars = Array.from(text);
    for (var i = 0; i < chars.length; i++) {
      var ch = chars[i];
      if (isWhitespace(ch)) {
        if (current) words.push(current);
        current = '';
      } else if (isPunctuation(ch, ch.codePointAt(0))) {
        if (current) words.push(current);
        words.push(ch);
        current = '';
      } else {
        current += ch;
      }
    }
    if (current) words.push(current);
    return words;
  }

  // ---------------------------------------------------------------- WordPiece

  // Greedy longest-match-first over the word's code points; `vocab` is a Map (an object would find
  // "constructor" or "__proto__" on its prototype).
  function wordPiece(word, vocab, model) {
    var chars = Array.from(word);
    if (chars.length > model.max_input_chars_per_word) return [model.unk_token];
    var pieces = [];
    var start = 0;
    while (start < chars.length) {
      var end = chars.length;
      var found = null;
      while (start < end) {
        var piece = chars.slice(start, end).join('');
        if (start > 0) piece = model.continuing_subword_prefix + piece;
        if (vocab.has(piece)) {
          found = piece;
          break;
        }
        end -= 1;
      }
      if (found === null) return [model.unk_token]; // one unknown piece makes the whole word unknown
      pieces.push(found);
      start = end;
    }
    return pieces;
  }

  // ---------------------------------------------------------------- added tokens

  // Leftmost-longest, non-overlapping matches of `tokens` (each {content, pattern, lstrip, rstrip, single_word})
  // in `text`, as the tokenizers crate's AddedVocabulary finds them (an Aho-Corasick automaton built
  // LeftmostLongest). Returns the pieces in order: {text} for the text between, {token} for a match.
  function splitOnAdded(text, tokens) {
    if (!tokens.length || !text) return [{ text: text }];
    var parts = [];
    var offset = 0; // end of the last piece taken (a match, with the whitespace it stripped)
    var at = 0; // where the search goes on: the end of the last match itself
    while (at < text.length) {
      var best = null;
      var start = at;
      for (; start < text.length && best === null; start++) {
        for (var t = 0; t < tokens.length; t++) {
          var pattern = tokens[t].pattern;
          if (pattern && (best === null || pattern.length > best.pattern.length) &&
              text.substr(start, pattern.length) === pattern) {
            best = tokens[t];
          }
        }
      }
      if (best === null) break;
      start -= 1;
      var stop = start + best.pattern.length;
      at = stop;
      if (best.single_word) {
        var before = Array.from(text.slice(0, start)).pop();
        var after = Array.from(text.slice(stop))[0];
        if ((before !== undefined && isWordChar(before)) || (after !== undefined && isWordChar(after))) continue;
      }
      if (best.lstrip) {
        var left = start;
        while (left > 0) {
          var prev = Array.from(text.slice(0, left)).pop();
          if (!isWhitespace(prev)) break;
          left -= prev.length;
        }
        start = Math.max(left, offset);
      }
      if (best.rstrip) {
        while (stop < text.length) {
          var next = String.fromCodePoint(text.codePointAt(stop));
          if (!isWhitespace(next)) break;
          stop += next.length;
        }
      }
      if (offset < start) parts.push({ text: text.slice(offset, start) });
      parts.push({ token: best });
      offset = stop;
    }
    if (offset < text.length) parts.push({ text: text.slice(offset) });
    return parts;
  }

  // ---------------------------------------------------------------- the tokenizer

  function emptyTextError(text, which) {
    var name = which === 'pair' ? 'the second sentence' : 'the text';
    if (/^\s*$/.test(text)) return new Error('Type a sentence: ' + name + ' is empty.');
    return new Error('Type a sentence: ' + name + ' has only invisible characters, no words the model can read.');
  }

  function createTokenizer(spec) {
    if (!spec || spec.version !== SPEC_VERSION) {
      throw new Error('This live view needs tokenizer data of version ' + SPEC_VERSION + ' (the site is from ' +
        'another reportgen version): rebuild the site.');
    }
    var model = spec.wordpiece;
    var settings = spec.normalizer;
    var vocab = new Map();
    var idToToken = spec.vocab.slice();
    spec.vocab.forEach(function (token, id) { vocab.set(token, id); });
    var rawTokens = [];
    var normalizedTokens = [];
    var ids = new Map(vocab);
    (spec.added_tokens || []).forEach(function (entry) {
      // A "normalized" added token is matched in the normalized text, by its normalized form, and that form is
      // also its token (probed: an added "Straw" of a lowercasing tokenizer comes back as "straw").
      var pattern = entry.normalized ? normalize(entry.content, settings) : entry.content;
      ids.set(pattern, entry.id);
      idToToken[entry.id] = pattern;
      var token = {
        content: pattern, id: entry.id, lstrip: !!entry.lstrip, rstrip: !!entry.rstrip,
        single_word: !!entry.single_word, pattern: pattern
      };
      (entry.normalized ? normalizedTokens : rawTokens).push(token);
    });
    var special = spec.special_tokens;

    // The text's pieces and their ids, side by side: an added token's id comes from the added token itself
    // (its content may also be a vocabulary entry with another id).
    function pieces(text) {
      var out = { tokens: [], ids: [] };
      function add(token, id) {
        out.tokens.push(token);
        out.ids.push(id);
      }
      splitOnAdded(String(text), rawTokens).forEach(function (part) {
        if (part.token) {
          add(part.token.content, part.token.id);
          return;
        }
        splitOnAdded(normalize(part.text, settings), normalizedTokens).forEach(function (inner) {
          if (inner.token) {
            add(inner.token.content, inner.token.id);
            return;
          }
          preTokenize(inner.text).forEach(function (word) {
            wordPiece(word, vocab, model).forEach(function (piece) { add(piece, vocab.get(piece)); });
          });
        });
      });
      return out;
    }

    function tokenize(text) {
      return pieces(text).tokens;
    }

    // How many tokens of each text to keep: the Rust code's "longest_first" (tokenizers' truncate_encodings),
    // which equals taking tokens off the end of the longer text one at a time; when both must be cut, the
    // first keeps floor(room / 2) and the second the rest if they were equally long.
    function keep(n1, n2, room) {
      if (n2 === null) return [Math.min(n1, room), null];
      if (n1 + n2 <= room) return [n1, n2];
      var swap = n1 > n2;
      var shorter = swap ? n2 : n1;
      var longer = swap ? n1 : n2;
      longer = shorter > room ? shorter : Math.max(shorter, room - shorter);
      if (shorter + longer > room) {
        shorter = Math.floor(room / 2);
        longer = shorter + (room % 2);
      }
      return swap ? [longer, shorter] : [shorter, longer];
    }

    function encode(text, pair, maxLength) {
      var source = text === null || text === undefined ? '' : String(text);
      var first = pieces(source);
      if (!first.tokens.length) throw emptyTextError(source, 'text');
      var hasPair = pair !== null && pair !== undefined && pair !== '';
      var second = hasPair ? pieces(String(pair)) : null;
      if (hasPair && !second.tokens.length) throw emptyTextError(String(pair), 'pair');
      var limit = maxLength === null || maxLength === undefined ? spec.model_max_length : maxLength;
      var specials = hasPair ? 3 : 2;
      var lengths = [first.tokens.length, hasPair ? second.tokens.length : null];
      if (limit !== null && limit !== undefined) {
        var least = specials + (hasPair ? 2 : 1);
        if (!(limit >= least)) {
          throw new Error('A maximum length of ' + limit + ' tokens leaves no room for the text: use at least ' +
            least + '.');
        }
        lengths = keep(lengths[0], lengths[1], limit - specials);
      }
      var truncated = lengths[0] < first.tokens.length || (hasPair && lengths[1] < second.tokens.length);
      var tokens = [special.cls.token].concat(first.tokens.slice(0, lengths[0]), [special.sep.token]);
      var idList = [special.cls.id].concat(first.ids.slice(0, lengths[0]), [special.sep.id]);
      var segments = tokens.map(function () { return 0; });
      if (hasPair) {
        tokens = tokens.concat(second.tokens.slice(0, lengths[1]), [special.sep.token]);
        idList = idList.concat(second.ids.slice(0, lengths[1]), [special.sep.id]);
        while (segments.length < tokens.length) segments.push(1);
      }
      return { ids: idList, tokens: tokens, segments: segments, truncated: truncated };
    }

    return {
      spec: spec,
      tokenize: tokenize,
      encode: encode,
      idToToken: function (id) { return idToToken[id]; },
      tokenToId: function (token) { return ids.has(token) ? ids.get(token) : null; }
    };
  }

  /*
   * The ids the views flag as special, as a build does (reportgen/model/special_tokens.py): the tokenizer's roles
   * and its special added tokens, less [UNK], which stands for a word of the text (a content token), unless
   * another role shares its id. Returns {id: true}.
   */
  function specialIds(spec) {
    var roles = spec.special_tokens;
    var out = {};
    Object.keys(roles).forEach(function (role) { out[roles[role].id] = true; });
    (spec.added_tokens || []).forEach(function (added) { if (added.special) out[added.id] = true; });
    var unk = roles.unk;
    var shared = unk && Object.keys(roles).some(function (role) { return role !== 'unk' && roles[role].id === unk.id; });
    if (unk && !shared) delete out[unk.id];
    return out;
  }

  var api = {
    SPEC_VERSION: SPEC_VERSION,
    createTokenizer: createTokenizer,
    specialIds: specialIds,
    // The pipeline's steps, exported for the tests (tests/js/live-tokenizer.test.js, tests/live/).
    normalize: normalize,
    preTokenize: preTokenize,
    wordPiece: wordPiece,
    isChinese: isChinese,
    isControl: isControl,
    isWhitespace: isWhitespace,
    isPunctuation: isPunctuation
  };

  if (typeof module !== 'undefined' && module.exports) module.exports = api;
  else root.reportgenLiveTokenizer = api;
})(typeof self !== 'undefined' ? self : this);
