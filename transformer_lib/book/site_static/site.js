// The book's pages: draw each chart (a div holding its vega-lite spec and its picture) with the bundled vega-embed,
// in the page's light or dark theme; the picture stays where JavaScript is off or a chart cannot be drawn. Every
// picture opens at full size.
(function () {
  "use strict";
  function dark() { return document.documentElement.getAttribute("data-theme") === "dark"; }
  function draw(box) {
    var spec = JSON.parse(box.querySelector("script[type='application/json']").textContent);
    var old = box.querySelector(".tb-chart-drawn");
    var target = document.createElement("div");
    target.className = "tb-chart-drawn";
    var options = {renderer: "svg", actions: false};
    if (dark()) { options.theme = "dark"; }
    return window.vegaEmbed(target, spec, options).then(function () {
      if (old) { old.remove(); }
      box.appendChild(target);
      box.setAttribute("data-drawn", "true");
    }).catch(function (err) { console.error("chart: " + err); });
  }
  function drawAll() { document.querySelectorAll(".tb-chart").forEach(draw); }
  function start() {
    if (!window.vegaEmbed) { return; }
    drawAll();
    var theme = dark();
    new MutationObserver(function () {
      if (dark() !== theme) { theme = dark(); drawAll(); }
    }).observe(document.documentElement, {attributes: true, attributeFilter: ["data-theme"]});
  }
  // every picture in the text opens at full size (the chapters' plots are links already; the diagrams become so)
  document.querySelectorAll("article img").forEach(function (img) {
    if (img.closest("a") || img.closest(".tb-chart")) { return; }
    var link = document.createElement("a");
    link.href = img.getAttribute("src");
    link.title = "Open the figure at full size";
    link.className = "tb-figure-link";
    img.parentNode.insertBefore(link, img);
    link.appendChild(img);
  });
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
