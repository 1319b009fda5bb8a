// The book's search ranking (Sphinx's html_search_scorer): Sphinx's own weights, then three nudges so that a query
// lands on the chapter that teaches it: a section whose heading holds every word of the query comes first; a chapter
// with a section named after the query ranks above chapters without one; a chapter ranks above the reference pages
// (docs/, solutions) that mention the same words.
var HEADINGS = {};  // each chapter's section headings, lowercased and without numbers: written by the site's builder
var Scorer = {
  score: function (result) {
    var docname = result[0], title = result[1], anchor = result[2], score = result[4];
    var query = (new URLSearchParams(window.location.search).get("q") || "").toLowerCase();
    var words = query.split(/[^a-z0-9]+/).filter(function (w) { return w.length > 0; });
    var heading = title.split(" > ").pop().toLowerCase();
    if (anchor && words.length && words.every(function (w) { return heading.indexOf(w) >= 0; })) { score += 30; }
    // a chapter with a section named after the query ("1. Layer normalization" for "layer norm") teaches it
    var phrase = words.join(" ");
    if (phrase && (HEADINGS[docname] || []).some(function (h) { return h.indexOf(phrase) === 0; })) { score += 50; }
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
