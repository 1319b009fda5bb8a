// The book's search ranking (Sphinx's html_search_scorer): Sphinx's own weights, then three nudges so that a query
// lands on the section that teaches it: a chapter with a section whose heading holds every word of the query (as the
// start of a word: "layer norm" in "Layer normalization", "KV cache" in "A key/value (KV) cache") ranks above chapters
// without one, the higher the more of that heading the query names, and its result links to that section, the first
// such in the chapter, so that the excerpt is the section's text; a chapter ranks above the reference pages (docs/,
// solutions) that mention the same words.
var HEADINGS = {};  // each chapter's section headings, lowercased and without numbers: written by the site's builder
function tbWords(text) { return text.toLowerCase().split(/[^a-z0-9]+/).filter(function (w) { return w.length > 0; }); }
function tbHolds(heading, words) {
  var own = tbWords(heading);
  return words.length > 0 && words.every(function (w) { return own.some(function (o) { return o.indexOf(w) === 0; }); });
}
// a heading as the builder lists it: markup, its number and a "Deeper:" or "Exercise N.N:" label left out
function tbPlain(title) {
  return title.replace(/[`*_]/g, "").trim().toLowerCase().replace(/^(?:[\d.]+\s+|deeper:\s*|exercise\s+[\d.]+:\s*)+/, "");
}
// the first section of `docname` whose heading holds the query's words: [its title as Sphinx lists it, its anchor]
function tbSection(docname, words) {
  var heading = (HEADINGS[docname] || []).filter(function (h) { return tbHolds(h, words); })[0];
  var index = typeof Search !== "undefined" ? Search._index : null;
  if (heading === undefined || !index || !index.alltitles) { return null; }
  var file = index.docnames.indexOf(docname);
  for (var title in index.alltitles) {
    if (tbPlain(title) !== heading) { continue; }
    var found = index.alltitles[title].filter(function (f) { return f[0] === file && f[1]; })[0];
    if (found) { return [title, found[1]]; }
  }
  return null;
}
var Scorer = {
  score: function (result) {
    var docname = result[0], title = result[1], anchor = result[2], score = result[4];
    var words = tbWords(new URLSearchParams(window.location.search).get("q") || "");
    var heading = title.split(" > ").pop();
    var section = tbSection(docname, words);
    if (section) {  // and the more of its heading the query names, the more the section is about it
      var own = tbWords(tbPlain(section[0])).filter(function (w) { return ["a", "an", "the"].indexOf(w) < 0; });
      var named = own.filter(function (o) { return words.some(function (w) { return o.indexOf(w) === 0; }); });
      score += 50 + Math.round(40 * named.length / Math.max(own.length, 1));
      if (!anchor || !tbHolds(tbPlain(heading), words)) {  // the page, or a section not about the query: the section
        var page = Search._index.titles[Search._index.docnames.indexOf(docname)];
        result[1] = page + " > " + section[0];
        result[2] = "#" + section[1];
        anchor = result[2];
        heading = section[0];
      }
    }
    if (anchor && tbHolds(tbPlain(heading), words)) { score += 30; }
    if (docname.indexOf("notebooks/") === 0) { score += 10; }
    return score;
  },
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: {0: 15, 1: 5, 2: -5},
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2
};
