// The live translator's tokenizer: chapter 6's SubwordTokenizer in the browser, the same ids for the same text.
// SpacyTokenizer is spaCy's rule-based tokenizer (the algorithm of spacy/tokenizer.pyx, v3) run on one language's
// rules as transformer_lib.book.live exports them: the prefix, suffix, infix and URL patterns and the special cases.
// It gives [text, spaceAfter] pairs, as a Doc's tokens and their whitespace_. Offsets are UTF-16 units throughout,
// where spaCy counts code points; it only compares lengths, so the cuts are the same.
"use strict";
// Python's str.isspace()
const PY_SPACE = /^[\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]$/u;
function isSpace(ch) { return PY_SPACE.test(ch); }

class SpacyTokenizer {
  constructor(rules) {
    this.prefix = new RegExp(rules.prefix, "u");
    this.suffix = new RegExp(rules.suffix, "u");
    this.infix = new RegExp(rules.infix, "gu");
    this.url = new RegExp(rules.url, "u");
    this.rules = new Map(Object.entries(rules.rules));
    // special cases with affixes: found after the affixes cut them, by their own affix tokens
    this.matched = rules.matched.map((s) => [s, this.tokenizeAffixes(s, false).map((t) => t[0])]);
  }
  findPrefix(s) { const m = this.prefix.exec(s); return m ? m[0].length : 0; }
  findSuffix(s) { const m = this.suffix.exec(s); return m ? m[0].length : 0; }
  findInfix(s) { return Array.from(s.matchAll(this.infix), (m) => [m.index, m.index + m[0].length]); }
  urlMatch(s) { const m = this.url.exec(s); return m !== null && m.index === 0; }
  special(s, withSpecial) { return withSpecial ? this.rules.get(s) : undefined; }

  tokenize(text) { return this.applySpecialCases(this.tokenizeAffixes(text, true)); }

  tokenizeAffixes(text, withSpecial) {
    const doc = [];
    if (text.length === 0) { return doc; }
    const chars = Array.from(text);
    let inWs = isSpace(chars[0]), start = 0, i = 0, pos = 0;
    const starts = [];  // UTF-16 offset of each code point
    for (const ch of chars) { starts.push(pos); pos += ch.length; }
    starts.push(pos);
    const push = (span) => {
      const sp = this.special(span, withSpecial);
      if (sp) { for (const t of sp) { doc.push([t, false]); } } else { this.tokenizeSpan(doc, span, withSpecial); }
    };
    for (const ch of chars) {
      if (isSpace(ch) !== inWs) {
        if (start < i) { push(text.slice(starts[start], starts[i])); }
        if (ch === " ") { doc[doc.length - 1][1] = true; start = i + 1; } else { start = i; }
        inWs = !inWs;
      }
      i += 1;
    }
    if (start < i) {
      push(text.slice(starts[start]));
      doc[doc.length - 1][1] = text[text.length - 1] === " " && !inWs;
    }
    return doc;
  }

  tokenizeSpan(doc, string, withSpecial) {
    const prefixes = [], suffixes = [];
    let lastSize = 0;
    while (string && string.length !== lastSize) {
      if (this.special(string, withSpecial)) { break; }
      lastSize = string.length;
      const preLen = this.findPrefix(string);
      let prefix, minusPre, suffix, minusSuf;
      if (preLen !== 0) {
        prefix = string.slice(0, preLen); minusPre = string.slice(preLen);
        if (minusPre && this.special(minusPre, withSpecial)) { string = minusPre; prefixes.push(prefix); break; }
      }
      const sufLen = this.findSuffix(string.slice(preLen));
      if (sufLen !== 0) {
        suffix = string.slice(string.length - sufLen); minusSuf = string.slice(0, string.length - sufLen);
        if (minusSuf && this.special(minusSuf, withSpecial)) { string = minusSuf; suffixes.push(suffix); break; }
      }
      if (preLen && sufLen && preLen + sufLen <= string.length) {
        string = string.slice(preLen, string.length - sufLen); prefixes.push(prefix); suffixes.push(suffix);
      } else if (preLen) { string = minusPre; prefixes.push(prefix); }
      else if (sufLen) { string = minusSuf; suffixes.push(suffix); }
    }
    for (const p of prefixes) { doc.push([p, false]); }
    if (string) {
      const sp = this.special(string, withSpecial);
      if (sp) { for (const t of sp) { doc.push([t, false]); } }
      else if (this.urlMatch(string)) { doc.push([string, false]); }
      else {
        const matches = this.findInfix(string);
        if (matches.length === 0) { doc.push([string, false]); }
        else {
          let start = 0;
          for (const [a, b] of matches) {
            if (a === 0) { continue; }
            if (a !== start) { doc.push([string.slice(start, a), false]); }
            if (a !== b) { doc.push([string.slice(a, b), false]); }
            start = b;
          }
          if (string.slice(start)) { doc.push([string.slice(start), false]); }
        }
      }
    }
    for (let k = suffixes.length - 1; k >= 0; k--) { doc.push([suffixes[k], false]); }
  }

  applySpecialCases(doc) {
    const found = [];  // [start, end) of every special case's affix tokens in doc
    for (const [, pattern] of this.matched) {
      if (pattern.length === 0) { continue; }
      for (let s = 0; s + pattern.length <= doc.length; s++) {
        if (pattern.every((t, k) => doc[s + k][0] === t)) { found.push([s, s + pattern.length]); }
      }
    }
    if (found.length === 0) { return doc; }
    // the longest first, then the first first (spaCy's len_start_cmp, read from the end); a span whose first or
    // last token was taken is dropped
    found.sort((x, y) => (x[1] - x[0]) - (y[1] - y[0]) || y[0] - x[0]);
    const seen = new Set(), kept = [];
    for (let k = found.length - 1; k >= 0; k--) {
      const [s, e] = found[k];
      if (!seen.has(s) && !seen.has(e - 1)) { kept.push([s, e]); }
      for (let t = s; t < e; t++) { seen.add(t); }
    }
    const at = new Map(kept.map(([s, e]) => [s, e]));
    const out = [];
    for (let i = 0; i < doc.length;) {
      if (!at.has(i)) { out.push(doc[i]); i += 1; continue; }
      const e = at.get(i);
      const text = doc.slice(i, e).map((t, k) => t[0] + (t[1] && k < e - i - 1 ? " " : "")).join("");
      const rule = this.rules.get(text);
      if (rule === undefined) { for (let k = i; k < e; k++) { out.push(doc[k]); } }
      else { rule.forEach((t, k) => out.push([t, k === rule.length - 1 ? doc[e - 1][1] : false])); }
      i = e;
    }
    return out;
  }
}

const SPACE = "\u2581";  // "▁": the mark of a piece after a space (data.SPACE)
const SPECIALS = ["<unk>", "<pad>", "<s>", "</s>"];

// Chapter 6's BPE: a pre-token's pieces, the pair learned first joined wherever it stands, left to right, until no
// pair is a merge (BPE._merge).
class BPE {
  constructor(merges) {
    this.rank = new Map();
    merges.forEach(([a, b], i) => {  // a pair learned twice keeps its first rank
      const key = a + "\u0000" + b;
      if (!this.rank.has(key)) { this.rank.set(key, i); }
    });
  }
  encodeWord(word) {
    const chars = Array.from(word);
    let symbols = chars.length > 1 && chars[0] === SPACE ? [chars[0] + chars[1], ...chars.slice(2)] : chars;
    for (;;) {
      let best = -1, pair = null;
      for (let i = 0; i + 1 < symbols.length; i++) {
        const r = this.rank.get(symbols[i] + "\u0000" + symbols[i + 1]);
        if (r !== undefined && (best < 0 || r < best)) { best = r; pair = [symbols[i], symbols[i + 1]]; }
      }
      if (pair === null) { return symbols; }
      const out = [];
      for (let i = 0; i < symbols.length;) {
        if (i + 1 < symbols.length && symbols[i] === pair[0] && symbols[i + 1] === pair[1]) {
          out.push(symbols[i] + symbols[i + 1]); i += 2;
        } else { out.push(symbols[i]); i += 1; }
      }
      symbols = out;
    }
  }
}

// A checkpoint's SubwordTokenizer and vocabularies: text -> pieces -> ids, and ids -> text (detokenize).
class SubwordTokenizer {
  constructor(rules, tokenizer, srcItos, tgtItos) {
    this.spacy = new SpacyTokenizer(rules);
    this.lower = tokenizer.lower;
    this.bpe = new BPE(tokenizer.merges);
    this.stoi = new Map(srcItos.map((t, i) => [t, i]));
    this.tgtItos = tgtItos;
  }
  normalize(text) {
    if (/[\ud800-\udfff]/u.test(text)) { throw new Error("the text holds a lone surrogate, which is not text"); }
    text = text.normalize("NFC");
    return this.lower ? text.toLowerCase() : text;
  }
  preTokens(text) {  // data.pre_tokens
    const words = [];
    let space = "";
    for (const [t, after] of this.spacy.tokenize(this.normalize(text))) {
      words.push(t.includes(SPACE) ? "<unk>" : space + t);
      space = after ? SPACE : "";
    }
    if (space) { words.push(space); }
    return words;
  }
  pieces(text) { return this.preTokens(text).flatMap((w) => (w === "<unk>" ? [w] : this.bpe.encodeWord(w))); }
  encode(text) { return this.pieces(text).map((p) => (this.stoi.has(p) ? this.stoi.get(p) : 0)); }
  detokenize(pieces) {  // SubwordTokenizer.detokenize
    const text = pieces.filter((t) => !SPECIALS.includes(t)).join("").split(SPACE).join(" ").trim();
    const first = Array.from(text)[0] || "";  // a code point, as Python's text[:1]
    return first.toUpperCase() + text.slice(first.length);
  }
  decode(ids) {  // Vocab.decode, then detokenize: up to </s>, without <s> and <pad>
    const end = ids.indexOf(3);
    return this.detokenize((end >= 0 ? ids.slice(0, end) : ids).map((i) => this.tgtItos[i]));
  }
}
if (typeof module !== "undefined") { module.exports = { SpacyTokenizer, BPE, SubwordTokenizer }; }
if (typeof window !== "undefined") { window.TranslatorTokenizer = SubwordTokenizer; }
