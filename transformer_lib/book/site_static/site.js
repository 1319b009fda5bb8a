// The book's pages: draw each chart (a div holding its vega-lite spec and its picture) with the bundled vega-embed,
// which only a page with a chart loads (_static/vega.js, beside this script), and only once a chart comes near the
// screen; the picture stays where JavaScript is off or a chart cannot be drawn. Every figure fits its column and opens
// at full size, where its smallest label is at least 9 CSS px tall.
(function () {
  "use strict";
  var here = document.currentScript ? document.currentScript.src : "";
  function loadScript(src, then) {
    var script = document.createElement("script");
    script.src = src;
    script.onload = then;
    script.onerror = function () { console.error("chart: " + script.src + " could not be loaded"); };
    document.head.appendChild(script);
  }
  function loadVega(then) {
    if (window.vegaEmbed) { then(); return; }
    loadScript(here.replace(/site\.js(\?.*)?$/, "vega.js$1"), then);
  }
  // a chart's spec, from the script the builder wrote beside this one (_static/charts/<its name>.js)
  function draw(box) {
    var name = box.getAttribute("data-chart") || "";
    if (!/^[A-Za-z0-9_.-]+$/.test(name)) { console.error("chart: no chart named " + name); return; }
    if (!(window.tbCharts && window.tbCharts[name])) {
      loadScript(here.replace(/site\.js(\?.*)?$/, "charts/" + name + ".js"), function () { draw(box); });
      return;
    }
    var spec = window.tbCharts[name];
    var target = document.createElement("div");
    target.className = "tb-chart-drawn";
    return window.vegaEmbed(target, spec, {renderer: "svg", actions: false}).then(function () {
      box.appendChild(target);
      var open = document.createElement("button");
      open.type = "button";
      open.className = "tb-chart-open btn btn-sm btn-outline-secondary";
      open.textContent = "Open the chart at full size";
      open.addEventListener("click", function () {
        zoomChart(target.querySelector("svg"), box.getAttribute("aria-label"));
      });
      box.appendChild(open);
      box.setAttribute("data-drawn", "true");
    }).catch(function (err) { console.error("chart: " + err); });
  }
  // The chart library (900 KB) loads when the first chart comes within a screen or so of view, not with the page.
  function drawWhenNear(charts) {
    var started = false;
    function go() {
      if (started) { return; }
      started = true;
      loadVega(function () { charts.forEach(draw); });
    }
    if (!("IntersectionObserver" in window)) { go(); return; }
    var near = new IntersectionObserver(function (entries) {
      if (entries.some(function (e) { return e.isIntersecting; })) { near.disconnect(); go(); }
    }, {rootMargin: "800px 0px"});
    charts.forEach(function (chart) { near.observe(chart); });
  }
  // The full-size view: the figure over the page, as wide as its labels need (and as the window allows, up to its own
  // size), scrolling in both directions and pinch-zoomable; the close button, Escape or a tap beside it closes it.
  function zoom(figure, label) {
    var overlay = document.createElement("div");
    overlay.className = "tb-zoom";
    overlay.setAttribute("role", "dialog");
    overlay.setAttribute("aria-modal", "true");
    overlay.setAttribute("aria-label", label || "The figure at full size");
    var close = document.createElement("button");
    close.type = "button";
    close.className = "tb-zoom-close";
    close.setAttribute("aria-label", "Close the full-size figure");
    close.textContent = "\u00d7";
    var box = document.createElement("div");
    box.className = "tb-zoom-box";
    box.appendChild(figure);
    overlay.appendChild(close);
    overlay.appendChild(box);
    var before = document.activeElement;
    function key(event) { if (event.key === "Escape") { shut(); } }
    function shut() {
      overlay.remove();
      document.removeEventListener("keydown", key);
      document.documentElement.classList.remove("tb-zoomed");
      if (before && before.focus) { before.focus(); }
    }
    close.addEventListener("click", shut);
    overlay.addEventListener("click", function (event) { if (event.target !== close) { shut(); } });
    document.addEventListener("keydown", key);
    document.body.appendChild(overlay);
    document.documentElement.classList.add("tb-zoomed");
    close.focus();
    return overlay;
  }
  function fullWidth(readable, own) {
    return Math.ceil(Math.max(readable || 0, Math.min(own, window.innerWidth - 16)));
  }
  function zoomPicture(img) {
    var readable = parseFloat(img.getAttribute("data-readable") || getComputedStyle(img).getPropertyValue("--tb-readable"));
    var copy = document.createElement("img");
    copy.src = img.currentSrc || img.src;
    copy.alt = img.alt;
    copy.style.width = fullWidth(readable, img.naturalWidth || img.getBoundingClientRect().width) + "px";
    return zoom(copy, img.alt);
  }
  // a chart's smallest label, 9 CSS px tall: the width that needs, from its SVG's own width and font sizes
  function zoomChart(svg, label) {
    var sizes = Array.prototype.map.call(svg.querySelectorAll("text"), function (t) {
      return parseFloat(getComputedStyle(t).fontSize);
    }).filter(function (size) { return size > 0; });
    var own = parseFloat(svg.getAttribute("width"));
    var copy = svg.cloneNode(true);
    copy.removeAttribute("height");
    copy.style.width = fullWidth(sizes.length ? own * 9 / Math.min.apply(null, sizes) : 0, own) + "px";
    copy.style.maxWidth = "none";
    return zoom(copy, label);
  }
  window.tbZoom = {picture: zoomPicture, chart: zoomChart};  // for the site's browser test
  function start() {
    var charts = document.querySelectorAll(".tb-chart");
    if (charts.length) { drawWhenNear(Array.prototype.slice.call(charts)); }
    if (document.querySelector(".tb-live-translator")) {  // the live translator's page: its script, from the site
      loadScript(here.replace(/site\.js(\?.*)?$/, "translator/page.js"), function () {});
    }
    wireToggles();
    wireThemeActions();
    plainExcerpts();
    linkPictures();
    foldDeeper();
    openTarget();
    window.addEventListener("hashchange", openTarget);
  }
  // A chapter's deeper sections (proofs, measurements, machinery) fold closed under their "Deeper:" heading: everything
  // from the heading to the marker the builder put after the section's last cell goes into a <details>. The heading is
  // the first "Deeper:" one after the marker before (a deeper section may hold "Deeper:" subsections of its own).
  function foldDeeper() {
    var before = null;
    document.querySelectorAll(".tb-deeper-end").forEach(function (end) {
      var heading = null;
      document.querySelectorAll("article h2, article h3, article h4").forEach(function (h) {
        var afterBefore = !before || (before.compareDocumentPosition(h) & Node.DOCUMENT_POSITION_FOLLOWING);
        var beforeEnd = h.compareDocumentPosition(end) & Node.DOCUMENT_POSITION_FOLLOWING;
        if (!heading && afterBefore && beforeEnd && /^\s*Deeper:/.test(h.textContent)) { heading = h; }
      });
      before = end;
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
  // The theme's print and full-screen buttons, whose handler attributes the site's policy would not run (the builder
  // names their action instead); and the search page's box, focused as the theme's own script did.
  function wireThemeActions() {
    document.querySelectorAll("[data-tb-action]").forEach(function (button) {
      button.addEventListener("click", function () {
        var action = button.getAttribute("data-tb-action");
        if (action === "print") { window.print(); }
        if (action === "fullscreen" && typeof window.toggleFullScreen === "function") { window.toggleFullScreen(); }
      });
    });
    var box = /search\.html$/.test(window.location.pathname) && document.querySelector("form.bd-search input");
    if (box) { box.focus(); box.select(); }
  }
  // Over file://, a browser refuses the requests Sphinx's search makes for its excerpts: list the pages without them.
  if (window.location.protocol === "file:" && typeof DOCUMENTATION_OPTIONS !== "undefined") {
    DOCUMENTATION_OPTIONS.SHOW_SEARCH_SUMMARY = false;
  }
  // The search page's excerpts are the pages' text, where math is still TeX source: each formula becomes "…" there,
  // and the contents list the theme keeps for print is left out, so that an excerpt is text, not headings.
  // (site.js runs before searchtools.js's own start, which fetches the excerpts later.)
  function plainExcerpts() {
    if (typeof Search === "undefined" || !Search.htmlToText) { return; }
    var toText = Search.htmlToText;
    Search.htmlToText = function (htmlString, anchor) {
      var page = new DOMParser().parseFromString(htmlString, "text/html");
      page.querySelectorAll(".math, mjx-container, script[type^='math/']").forEach(function (m) {
        m.replaceWith(page.createTextNode("…"));
      });
      page.querySelectorAll(".onlyprint, .bd-sidebar-secondary, .bd-header-article, .tb-deeper-end")
        .forEach(function (m) { m.remove(); });
      return toText(page.documentElement.outerHTML, anchor);
    };
  }
  // every picture in the text opens at full size: a link to its file (where JavaScript is off), the full-size view here
  function linkPictures() {
    document.querySelectorAll("article img").forEach(function (img) {
      if (img.closest(".tb-chart")) { return; }
      var link = img.closest("a");
      if (!link) {
        link = document.createElement("a");
        link.href = img.getAttribute("src");
        link.className = "tb-figure-link";
        img.parentNode.insertBefore(link, img);
        link.appendChild(img);
      }
      if (!link.classList.contains("tb-figure-link")) { return; }  // a picture that links elsewhere keeps its link
      link.title = "Open the figure at full size";
      link.addEventListener("click", function (event) {
        event.preventDefault();
        zoomPicture(img);
      });
    });
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
