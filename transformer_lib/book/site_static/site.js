// The book's pages: draw each chart (a div holding its vega-lite spec and its picture) with the bundled vega-embed,
// which only a page with a chart loads (_static/vega.js, beside this script); the picture stays where JavaScript is
// off or a chart cannot be drawn. Every picture opens at full size.
(function () {
  "use strict";
  var here = document.currentScript ? document.currentScript.src : "";
  function loadVega(then) {
    if (window.vegaEmbed) { then(); return; }
    var script = document.createElement("script");
    script.src = here.replace(/site\.js(\?.*)?$/, "vega.js$1");
    script.onload = then;
    script.onerror = function () { console.error("chart: " + script.src + " could not be loaded"); };
    document.head.appendChild(script);
  }
  function draw(box) {
    var spec = JSON.parse(box.querySelector("script[type='application/json']").textContent);
    var target = document.createElement("div");
    target.className = "tb-chart-drawn";
    return window.vegaEmbed(target, spec, {renderer: "svg", actions: false}).then(function () {
      box.appendChild(target);
      keepReadable(target.querySelector("svg"));
      box.setAttribute("data-drawn", "true");
    }).catch(function (err) { console.error("chart: " + err); });
  }
  // A chart shrinks with the column, but never so far that its smallest label is under 9 CSS px: in a narrower column
  // (a phone's) it keeps that width and scrolls sideways in its box.
  function keepReadable(svg) {
    if (!svg) { return; }
    var sizes = Array.prototype.map.call(svg.querySelectorAll("text"), function (t) {
      return parseFloat(getComputedStyle(t).fontSize);
    }).filter(function (size) { return size > 0; });
    var width = parseFloat(svg.getAttribute("width"));
    if (sizes.length && width > 0) {
      svg.style.minWidth = Math.ceil(width * 9 / Math.min.apply(null, sizes)) + "px";
    }
  }
  function start() {
    var charts = document.querySelectorAll(".tb-chart");
    if (charts.length) { loadVega(function () { charts.forEach(draw); }); }
    wireToggles();
    plainExcerpts();
    linkPictures();
    foldDeeper();
    openTarget();
    window.addEventListener("hashchange", openTarget);
  }
  // A chapter's deeper sections (proofs, measurements, machinery) fold closed under their "Deeper:" heading: everything
  // from the heading to the marker the builder put after the section's last cell goes into a <details>.
  function foldDeeper() {
    document.querySelectorAll(".tb-deeper-end").forEach(function (end) {
      var heading = null;
      document.querySelectorAll("article h2, article h3, article h4").forEach(function (h) {
        var pos = h.compareDocumentPosition(end);
        if (/^\s*Deeper:/.test(h.textContent) && (pos & Node.DOCUMENT_POSITION_FOLLOWING)) { heading = h; }
      });
      if (!heading) { return; }
      var range = document.createRange();
      range.setStartAfter(heading);
      range.setEndBefore(end);
      var details = document.createElement("details");
      details.className = "tb-deeper";
      var summary = document.createElement("summary");
      heading.parentNode.insertBefore(details, heading);
      details.appendChild(summary);
      var body = range.extractContents();
      summary.appendChild(heading);
      details.appendChild(body);
      // a section cut in two keeps its id on the half inside the fold, where its heading went
      details.querySelectorAll("[id]").forEach(function (inner) {
        var twin = document.querySelectorAll("[id='" + inner.id.replace(/'/g, "\\'") + "']");
        Array.prototype.forEach.call(twin, function (other) { if (other !== inner && !details.contains(other)) { other.removeAttribute("id"); } });
      });
    });
  }
  // a link to something inside a folded section opens the fold
  function openTarget() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    var target = id && document.getElementById(id);
    for (var node = target; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") { node.open = true; }
    }
    if (target) { target.scrollIntoView(); }
  }
  // The theme wires its menu and contents buttons by the first of each on the page, a header button hidden in this
  // layout: the buttons the reader sees pass their click on to it.
  function wireToggles() {
    ["primary-toggle", "secondary-toggle"].forEach(function (name) {
      var buttons = document.querySelectorAll("button." + name);
      Array.prototype.slice.call(buttons, 1).forEach(function (button) {
        button.addEventListener("click", function (event) {
          event.preventDefault();
          event.stopPropagation();
          buttons[0].click();
        });
      });
    });
  }
  // Over file://, a browser refuses the requests Sphinx's search makes for its excerpts: list the pages without them.
  if (window.location.protocol === "file:" && typeof DOCUMENTATION_OPTIONS !== "undefined") {
    DOCUMENTATION_OPTIONS.SHOW_SEARCH_SUMMARY = false;
  }
  // The search page's excerpts are the pages' text, where math is still TeX source: each formula becomes "…" there.
  // (site.js runs before searchtools.js's own start, which fetches the excerpts later.)
  function plainExcerpts() {
    if (typeof Search === "undefined" || !Search.htmlToText) { return; }
    var toText = Search.htmlToText;
    Search.htmlToText = function (htmlString, anchor) {
      var page = new DOMParser().parseFromString(htmlString, "text/html");
      page.querySelectorAll(".math, mjx-container, script[type^='math/']").forEach(function (m) {
        m.replaceWith(page.createTextNode("…"));
      });
      return toText(page.documentElement.outerHTML, anchor);
    };
  }
  // every picture in the text opens at full size (the chapters' plots are links already; the diagrams become so)
  function linkPictures() {
    document.querySelectorAll("article img").forEach(function (img) {
      if (img.closest("a") || img.closest(".tb-chart")) { return; }
      var link = document.createElement("a");
      link.href = img.getAttribute("src");
      link.title = "Open the figure at full size";
      link.className = "tb-figure-link";
      img.parentNode.insertBefore(link, img);
      link.appendChild(img);
    });
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
