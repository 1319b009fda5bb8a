// The live translator's model: chapter 4's encoder-decoder (pre-norm, as the shipped recipe trains it) in plain
// JavaScript, one sentence at a time, with chapter 7's key/value cache, greedy decoding and beam search. Every step
// gives the log-probabilities of the next token and the cross-attention of the token fed in, per layer and head.
// The weights come as one ArrayBuffer and its table (transformer_lib.book.live.model_weights).
"use strict";

function linear(x, rows, w, b, nOut, nIn) {  // x (rows, nIn) @ w^T (nIn, nOut) + b: nn.Linear
  const y = new Float32Array(rows * nOut);
  for (let r = 0; r < rows; r++) {
    const xo = r * nIn;
    for (let o = 0; o < nOut; o++) {
      const wo = o * nIn;
      let s = 0;
      for (let i = 0; i < nIn; i++) { s += x[xo + i] * w[wo + i]; }
      y[r * nOut + o] = s + (b ? b[o] : 0);
    }
  }
  return y;
}

function layerNorm(x, rows, d, g, b, eps) {  // chapter 3's LayerNorm: biased variance, eps inside the root
  const y = new Float32Array(rows * d);
  for (let r = 0; r < rows; r++) {
    let mean = 0, v = 0;
    for (let i = 0; i < d; i++) { mean += x[r * d + i]; }
    mean /= d;
    for (let i = 0; i < d; i++) { const c = x[r * d + i] - mean; v += c * c; }
    const inv = 1 / Math.sqrt(v / d + eps);
    for (let i = 0; i < d; i++) { y[r * d + i] = g[i] * (x[r * d + i] - mean) * inv + b[i]; }
  }
  return y;
}

function addInPlace(x, y) { for (let i = 0; i < x.length; i++) { x[i] += y[i]; } return x; }

function float16(bits) {  // an IEEE half as a number
  const sign = bits & 0x8000 ? -1 : 1, exp = (bits >> 10) & 0x1f, frac = bits & 0x3ff;
  if (exp === 0) { return sign * frac * 2 ** -24; }
  if (exp === 31) { return frac ? NaN : sign * Infinity; }
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

// The weights as model_weights wrote them (an ArrayBuffer and its table), each as a Float32Array: int8 rows times
// their scale, float16 widened, float32 as it is; "same" is a tied tensor, shared.
function loadWeights(table, buffer) {
  const w = {};
  for (const [name, kind, offset, shape, scales] of table) {
    const n = shape.reduce((a, b) => a * b, 1);
    if (kind === "same") { w[name] = w[offset]; continue; }
    if (kind === "f32") { w[name] = new Float32Array(buffer, offset, n); continue; }
    const out = new Float32Array(n);
    if (kind === "f16") {
      const half = new Uint16Array(buffer, offset, n);
      for (let i = 0; i < n; i++) { out[i] = float16(half[i]); }
    } else if (kind === "i8") {
      const q = new Int8Array(buffer, offset, n), scale = new Float32Array(buffer, scales, shape[0]);
      const cols = shape[1];
      for (let i = 0; i < n; i++) { out[i] = q[i] * scale[Math.floor(i / cols)]; }
    } else { throw new Error(`weights: ${name} is of an unknown kind ${kind}`); }
    w[name] = out;
  }
  return w;
}

class Translator {
  constructor(table, buffer, config) {
    this.w = loadWeights(table, buffer);
    Object.assign(this, config);  // d_model, n_heads, n_layers, d_ff, eps, vocab (target), bos, eos, pad
    this.dk = this.d_model / this.n_heads;
  }

  embed(prefix, ids, start) {  // TokenEmbedding * sqrt(d) + sinusoidal positions (chapter 1)
    const d = this.d_model, table = this.w[prefix + ".0.embedding.weight"], x = new Float32Array(ids.length * d);
    const scale = Math.sqrt(d);
    ids.forEach((id, t) => {
      const pos = start + t;
      for (let i = 0; i < d; i += 2) {
        const angle = pos * Math.exp(-(Math.log(10000) * i) / d);
        x[t * d + i] = table[id * d + i] * scale + Math.sin(angle);
        if (i + 1 < d) { x[t * d + i + 1] = table[id * d + i + 1] * scale + Math.cos(angle); }
      }
    });
    return x;
  }

  project(p, x, rows, name) {
    return linear(x, rows, this.w[`${p}.${name}.weight`], this.w[`${p}.${name}.bias`], this.d_model, this.d_model);
  }

  // queries (nq, d) against keys and values (nk, d), heads split; allowed(i, j) says which keys a query sees.
  // Returns the mixed values after w_o and the weights (n_heads, nq, nk).
  attend(p, q, nq, k, v, nk, allowed) {
    const { d_model: d, n_heads: h, dk } = this, mixed = new Float32Array(nq * d);
    const weights = new Float32Array(h * nq * nk), scale = 1 / Math.sqrt(dk);
    for (let head = 0; head < h; head++) {
      for (let i = 0; i < nq; i++) {
        const row = weights.subarray((head * nq + i) * nk, (head * nq + i + 1) * nk);
        let max = -Infinity;
        for (let j = 0; j < nk; j++) {
          if (!allowed(i, j)) { row[j] = -Infinity; continue; }
          let s = 0;
          for (let c = 0; c < dk; c++) { s += q[i * d + head * dk + c] * k[j * d + head * dk + c]; }
          row[j] = s * scale;
          if (row[j] > max) { max = row[j]; }
        }
        let sum = 0;
        for (let j = 0; j < nk; j++) { row[j] = row[j] === -Infinity ? 0 : Math.exp(row[j] - max); sum += row[j]; }
        for (let j = 0; j < nk; j++) {
          row[j] = sum > 0 ? row[j] / sum : 0;
          if (row[j] === 0) { continue; }
          for (let c = 0; c < dk; c++) { mixed[i * d + head * dk + c] += row[j] * v[j * d + head * dk + c]; }
        }
      }
    }
    return [this.project(p, mixed, nq, "w_o"), weights];
  }

  feedForward(p, x, rows) {
    const hidden = linear(x, rows, this.w[`${p}.w_1.weight`], this.w[`${p}.w_1.bias`], this.d_ff, this.d_model);
    for (let i = 0; i < hidden.length; i++) { if (hidden[i] < 0) { hidden[i] = 0; } }
    return linear(hidden, rows, this.w[`${p}.w_2.weight`], this.w[`${p}.w_2.bias`], this.d_model, this.d_ff);
  }

  norm(p, x, rows) { return layerNorm(x, rows, this.d_model, this.w[`${p}.weight`], this.w[`${p}.bias`], this.eps); }

  // The source's memory, and each decoder layer's cross-attention keys and values of it (computed once).
  encode(src) {
    const n = src.length;
    let x = this.embed("src_embed", src, 0);
    for (let l = 0; l < this.n_layers; l++) {
      const p = `encoder.layers.${l}`;
      let y = this.norm(`${p}.sublayers.0.norm`, x, n);
      const a = `${p}.self_attn`;
      addInPlace(x, this.attend(a, this.project(a, y, n, "w_q"), n, this.project(a, y, n, "w_k"),
                                this.project(a, y, n, "w_v"), n, () => true)[0]);
      y = this.norm(`${p}.sublayers.1.norm`, x, n);
      addInPlace(x, this.feedForward(`${p}.feed_forward`, y, n));
    }
    const memory = this.norm("encoder.norm", x, n);
    const cross = [];
    for (let l = 0; l < this.n_layers; l++) {
      const a = `decoder.layers.${l}.src_attn`;
      cross.push([this.project(a, memory, n, "w_k"), this.project(a, memory, n, "w_v")]);
    }
    return { n, cross };
  }

  // A decoder state: the keys and values of every token fed in so far, per layer.
  start() {
    const layers = () => Array.from({ length: this.n_layers }, () => []);
    return { t: 0, keys: layers(), values: layers() };
  }
  copyState(s) { return { t: s.t, keys: s.keys.map((k) => k.slice()), values: s.values.map((v) => v.slice()) }; }

  // Feed one token: the next token's log-probabilities (vocab) and the cross-attention of the fed token
  // (n_layers x n_heads x source length). The state grows by the token.
  step(memory, state, token) {
    const d = this.d_model;
    let x = this.embed("tgt_embed", [token], state.t);
    const cross = [];
    for (let l = 0; l < this.n_layers; l++) {
      const p = `decoder.layers.${l}`;
      let y = this.norm(`${p}.sublayers.0.norm`, x, 1);
      const a = `${p}.self_attn`;
      state.keys[l].push(this.project(a, y, 1, "w_k"));
      state.values[l].push(this.project(a, y, 1, "w_v"));
      const t = state.keys[l].length, k = new Float32Array(t * d), v = new Float32Array(t * d);
      state.keys[l].forEach((row, j) => k.set(row, j * d));
      state.values[l].forEach((row, j) => v.set(row, j * d));
      addInPlace(x, this.attend(a, this.project(a, y, 1, "w_q"), 1, k, v, t, () => true)[0]);
      y = this.norm(`${p}.sublayers.1.norm`, x, 1);
      const c = `${p}.src_attn`, [mk, mv] = memory.cross[l];
      const [out, weights] = this.attend(c, this.project(c, y, 1, "w_q"), 1, mk, mv, memory.n, () => true);
      addInPlace(x, out);
      cross.push(weights);
      y = this.norm(`${p}.sublayers.2.norm`, x, 1);
      addInPlace(x, this.feedForward(`${p}.feed_forward`, y, 1));
    }
    state.t += 1;
    const h = this.norm("decoder.norm", x, 1);
    const logits = linear(h, 1, this.w["generator.proj.weight"], this.w["generator.proj.bias"], this.vocab, d);
    let max = -Infinity, sum = 0;
    for (const z of logits) { if (z > max) { max = z; } }
    for (const z of logits) { sum += Math.exp(z - max); }
    const logSum = max + Math.log(sum);
    for (let i = 0; i < logits.length; i++) { logits[i] -= logSum; }
    return { logProbs: logits, cross };
  }

  maxLength(src) { return Math.min(Math.floor(1.5 * src.length) + 10, this.max_len); }  // translate_tokens' rule

  // Greedy decoding (chapter 7): every step, its token, log-probabilities and cross-attention.
  greedy(src) {
    const memory = this.encode(src), state = this.start(), steps = [];
    let token = this.bos;
    for (let i = 0; i < this.maxLength(src); i++) {
      const { logProbs, cross } = this.step(memory, state, token);
      let best = 0;
      for (let v = 1; v < logProbs.length; v++) { if (logProbs[v] > logProbs[best]) { best = v; } }
      steps.push({ fed: token, token: best, logProbs, cross });
      token = best;
      if (token === this.eos) { break; }
    }
    return steps;
  }

  // Beam search as chapter 7's beam_search: K hypotheses, a finished one extends only by </s> at no cost, the K best
  // of the K x V extensions each step (ties to the lower index, as torch.topk on CPU), and at the end the best score
  // divided by ((5 + length) / 6) ** lengthPenalty. Returns the best hypothesis and every step's beams.
  beam(src, K, lengthPenalty) {
    const memory = this.encode(src), V = this.vocab;
    let beams = [{ ys: [this.bos], score: 0, length: 0, finished: false, state: this.start() }];
    for (let k = 1; k < K; k++) {  // the others start at -Infinity: the first step extends one hypothesis
      beams.push({ ys: [this.bos], score: -Infinity, length: 0, finished: false, state: this.start() });
    }
    const history = [];
    for (let i = 0; i < this.maxLength(src); i++) {
      const candidates = [];
      beams.forEach((b, k) => {
        const { logProbs } = this.step(memory, b.state, b.ys[b.ys.length - 1]);
        for (let v = 0; v < V; v++) {
          const lp = b.finished ? (v === this.eos ? 0 : -Infinity) : logProbs[v];
          candidates.push([b.score + lp, k * V + v]);
        }
      });
      candidates.sort((x, y) => (y[0] - x[0]) || (x[1] - y[1]) || 0);
      beams = candidates.slice(0, K).map(([score, flat]) => {
        const from = beams[Math.floor(flat / V)], token = flat % V;
        return { ys: [...from.ys, token], score, from: Math.floor(flat / V), state: this.copyState(from.state),
                 length: from.length + (from.finished ? 0 : 1), finished: from.finished || token === this.eos };
      });
      history.push(beams.map((b) => ({ ys: b.ys.slice(1), score: b.score, from: b.from, finished: b.finished,
                                       length: b.length })));
      if (beams.every((b) => b.finished)) { break; }
    }
    const ranked = beams.map((b) => b.score / Math.pow((5 + b.length) / 6, lengthPenalty));
    let best = 0;
    for (let k = 1; k < ranked.length; k++) { if (ranked[k] > ranked[best]) { best = k; } }
    const row = beams[best].ys.slice(1), end = row.indexOf(this.eos);
    return { tokens: end >= 0 ? row.slice(0, end + 1) : row, history, ranked };
  }
}
if (typeof module !== "undefined") { module.exports = { Translator, loadWeights }; }
if (typeof window !== "undefined") { window.TranslatorModel = Translator; }
