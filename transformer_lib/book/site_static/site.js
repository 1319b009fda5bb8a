// The book's pages: draw each chart (a div holding its vega-lite spec and its picture) with the bundled vega-embed;
// the picture stays where JavaScript is off or a chart cannot be drawn. Every picture opens at full size.
(function () {
  "use strict";
  function draw(box) {
    var spec = JSON.parse(box.querySelector("script[type='application/json']").textContent);
    var target = document.createElement("div");
    target.className = "tb-chart-drawn";
    return window.vegaEmbed(target, spec, {renderer: "svg", actions: false}).then(function () {
      box.appendChild(target);
      box.setAttribute("data-drawn", "true");
    }).catch(function (err) { console.error("chart: " + err); });
  }
  function start() {
    if (window.vegaEmbed) { document.querySelectorAll(".tb-chart").forEach(draw); }
    wireToggles();
    linkPictures();
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
