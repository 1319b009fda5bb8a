// The live translator's page: a reader types German (or picks a caption), the shipped model translates it in this
// browser, and the reader steps through the translation. Each step shows the German pieces shaded by the
// cross-attention of the token fed in (a layer and head, or the heads' mean), the English so far, the likeliest next
// tokens, and under beam search the beams with the length penalty's ranking. Nothing is fetched until the reader
// asks for a translation, and then only the site's own files (_static/translator/).
(function () {
  "use strict";
  var here = document.currentScript ? document.currentScript.src : "";
  var base = here.replace(/page\.js(\?.*)?$/, "");

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") { node.textContent = attrs[k]; } else { node.setAttribute(k, attrs[k]); }
    });
    (children || []).forEach(function (c) { node.appendChild(c); });
    return node;
  }
  function loadScript(src) {
    return new Promise(function (resolve, reject) {
      var script = el("script", {src: src});
      script.onload = resolve;
      script.onerror = function () { reject(new Error(src + " could not be loaded")); };
      document.head.appendChild(script);
    });
  }

  var engine = null;  // {tok, model, assets}, loaded once
  function load(status) {
    if (engine) { return Promise.resolve(engine); }
    status.textContent = "Loading the model (about 8 MB, once)...";
    return Promise.all([loadScript(base + "tokenizer.js"), loadScript(base + "model.js"),
                        fetch(base + "assets.json").then(function (r) { return r.json(); }),
                        fetch(base + "weights.bin").then(function (r) { return r.arrayBuffer(); })])
      .then(function (got) {
        var a = got[2];
        engine = {assets: a, tok: new window.TranslatorTokenizer(a.rules, a.tokenizer, a.src_itos, a.tgt_itos),
                  model: new window.TranslatorModel(a.table, got[3], a.config)};
        return engine;
      });
  }

  function shade(weight) {  // an attention weight in [0, 1] as a background light enough for the text on it
    return "rgba(0, 128, 128, " + (0.6 * Math.min(1, weight)).toFixed(3) + ")";
  }

  function build(box) {
    var examples = JSON.parse(box.getAttribute("data-examples") || "[]");
    var input = el("input", {type: "text", "class": "tb-live-input", "aria-label": "A German sentence",
                             value: examples[0] || ""});
    var pick = el("select", {"class": "tb-live-examples", "aria-label": "A caption to translate"},
                  examples.map(function (e) { return el("option", {value: e, text: e}); }));
    pick.addEventListener("change", function () { input.value = pick.value; });
    var search = el("select", {"class": "tb-live-search", "aria-label": "The search"},
                    [el("option", {value: "1", text: "greedy"}),
                     el("option", {value: "5", text: "beam search, 5 beams"})]);
    var penalty = el("input", {type: "number", "class": "tb-live-penalty", step: "0.1", min: "0", max: "3",
                               value: "0.6", "aria-label": "The length penalty"});
    var go = el("button", {type: "button", "class": "btn btn-sm btn-primary tb-live-go", text: "Translate"});
    var status = el("p", {"class": "tb-live-status", "aria-live": "polite"});
    var view = el("div", {"class": "tb-live-view"});
    box.appendChild(el("div", {"class": "tb-live-form"}, [input, pick, search,
      el("label", {text: "length penalty "}, [penalty]), go]));
    box.appendChild(status);
    box.appendChild(view);
    go.addEventListener("click", function () {
      go.disabled = true;
      load(status).then(function (e) {
        var text = input.value;
        var src = e.tok.encode(text);
        if (!text.trim() || src.length === 0) { status.textContent = "Type a German sentence first."; return; }
        var run = translate(e, src, parseInt(search.value, 10), parseFloat(penalty.value) || 0);
        status.textContent = run.flag;
        show(view, e, src, run);
      }).catch(function (err) { status.textContent = "The translator could not start: " + err.message; })
        .then(function () { go.disabled = false; });
    });
  }

  // The whole translation at once, then every step to step through: for greedy, its steps; for beam search, the
  // chosen hypothesis fed again (its cross-attention and next tokens) and the beams of each step.
  function translate(e, src, beams, lengthPenalty) {
    var m = e.model, result = {beams: null}, steps;
    if (beams === 1) {
      steps = m.greedy(src);  // each step already holds what the page shows
    } else {  // the chosen hypothesis fed again, for its cross-attention and next tokens
      var b = m.beam(src, beams, lengthPenalty), memory = m.encode(src), state = m.start(), fed = m.bos;
      result.beams = b.history;
      steps = b.tokens.map(function (token) {
        var out = m.step(memory, state, fed);
        var step = {fed: fed, token: token, logProbs: out.logProbs, cross: out.cross};
        fed = token;
        return step;
      });
    }
    var total = steps.reduce(function (sum, s) { return sum + s.logProbs[s.token]; }, 0);
    var perToken = total / Math.max(1, steps.length);
    result.steps = steps;
    result.perToken = perToken;
    result.flag = perToken < e.assets.config.unfamiliar_below ?
      "The model is guessing (" + perToken.toFixed(2) + " a token, below " + e.assets.config.unfamiliar_below +
      "): this sentence is unlike the captions it learned from, so its translation is likely wrong." :
      "The model is sure enough (" + perToken.toFixed(2) + " a token): a sentence like its captions.";
    return result;
  }

  function show(view, e, src, run) {
    var a = e.assets, srcPieces = src.map(function (id) { return a.src_itos[id]; });
    view.textContent = "";
    var n = run.steps.length, at = 0, timer = null;
    var layer = el("select", {"class": "tb-live-layer", "aria-label": "The layer"});
    for (var l = 0; l < a.config.n_layers; l++) {
      layer.appendChild(el("option", {value: String(l), text: "layer " + (l + 1)}));
    }
    layer.value = String(Math.min(1, a.config.n_layers - 1));  // layer 2 first, as chapter 7 reads it
    var head = el("select", {"class": "tb-live-head", "aria-label": "The head"},
                  [el("option", {value: "mean", text: "mean of the heads"})]);
    for (var h = 0; h < a.config.n_heads; h++) {
      head.appendChild(el("option", {value: String(h), text: "head " + (h + 1)}));
    }
    var back = el("button", {type: "button", "class": "btn btn-sm btn-outline-secondary tb-live-back", text: "Back"});
    var next = el("button", {type: "button", "class": "btn btn-sm btn-outline-secondary tb-live-next", text: "Next"});
    var play = el("button", {type: "button", "class": "btn btn-sm btn-outline-secondary tb-live-play", text: "Play"});
    var slider = el("input", {type: "range", min: "0", max: String(n - 1), value: "0", "class": "tb-live-slider",
                              "aria-label": "The step"});
    var german = el("p", {"class": "tb-live-german"}), english = el("p", {"class": "tb-live-english"});
    var likely = el("ol", {"class": "tb-live-likely"}), beams = el("ol", {"class": "tb-live-beams"});
    view.appendChild(el("div", {"class": "tb-live-controls"}, [back, next, play, slider, layer, head]));
    view.appendChild(el("p", {text: "The German pieces, shaded by the attention of the token fed in:"}));
    view.appendChild(german);
    view.appendChild(english);
    view.appendChild(el("p", {text: "The likeliest next tokens:"}));
    view.appendChild(likely);
    if (run.beams) {
      view.appendChild(el("p", {text: "The beams after this step, with their log-probabilities. At the end they are " +
                                      "ranked by log-probability / ((5 + length) / 6) ** penalty:"}));
      view.appendChild(beams);
    }

    function render() {
      var s = run.steps[at], L = parseInt(layer.value, 10), heads = a.config.n_heads, S = srcPieces.length;
      var w = s.cross[L], row = [];
      for (var j = 0; j < S; j++) {
        var v = 0;
        if (head.value === "mean") { for (var k = 0; k < heads; k++) { v += w[k * S + j]; } v /= heads; }
        else { v = w[parseInt(head.value, 10) * S + j]; }
        row.push(v);
      }
      german.textContent = "";
      srcPieces.forEach(function (p, j) {
        german.appendChild(el("span", {"class": "tb-live-piece", style: "background:" + shade(row[j]),
                                       title: row[j].toFixed(3), "data-weight": row[j].toFixed(6), text: p}));
      });
      var so = run.steps.slice(0, at).map(function (t) { return a.tgt_itos[t.token]; });
      english.textContent = "Fed in: " + a.tgt_itos[s.fed] + ". English so far: " +
        (e.tok.detokenize(so) || "(nothing yet)");
      var order = Array.from(s.logProbs.keys())
        .sort(function (x, y) { return s.logProbs[y] - s.logProbs[x]; }).slice(0, 5);
      likely.textContent = "";
      order.forEach(function (id) {
        likely.appendChild(el("li", {text: a.tgt_itos[id] + "  " + (100 * Math.exp(s.logProbs[id])).toFixed(1) + "%" +
                                          (id === s.token ? "  (chosen)" : "")}));
      });
      if (run.beams) {
        beams.textContent = "";
        (run.beams[at] || []).forEach(function (b) {
          var words = b.ys.map(function (id) { return a.tgt_itos[id]; }).join(" ");
          beams.appendChild(el("li", {text: words + "  " + b.score.toFixed(2) + (b.finished ? "  (finished)" : "")}));
        });
      }
      slider.value = String(at);
      back.disabled = at === 0;
      next.disabled = at === n - 1;
    }
    function go(to) { at = Math.max(0, Math.min(n - 1, to)); render(); }
    back.addEventListener("click", function () { go(at - 1); });
    next.addEventListener("click", function () { go(at + 1); });
    slider.addEventListener("input", function () { go(parseInt(slider.value, 10)); });
    layer.addEventListener("change", render);
    head.addEventListener("change", render);
    play.addEventListener("click", function () {
      if (timer) { clearInterval(timer); timer = null; play.textContent = "Play"; return; }
      play.textContent = "Pause";
      timer = setInterval(function () {
        if (at >= n - 1) { clearInterval(timer); timer = null; play.textContent = "Play"; return; }
        go(at + 1);
      }, 900);
    });
    render();
  }

  window.tbLive = {load: load, translate: translate};  // for the site's browser test
  document.querySelectorAll("div.tb-live-translator").forEach(build);
})();
