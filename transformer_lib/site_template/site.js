// The book's pages: draw the interactive charts with the bundled vega-embed, and the search box.
(function () {
  "use strict";
  document.querySelectorAll(".vega-chart").forEach(function (div) {
    var spec = JSON.parse(div.querySelector("script[type='application/json']").textContent);
    var target = document.createElement("div");
    div.appendChild(target);
    window.vegaEmbed(target, spec, {renderer: "svg", actions: false}).then(function () {
      var fallback = div.querySelector("img.chart-fallback");
      if (fallback) { fallback.remove(); }  // the static picture, for readers without JavaScript
      div.setAttribute("data-drawn", "true");
    }).catch(function (err) { console.error("chart " + div.id + ": " + err); });
  });

  var box = document.getElementById("search"), list = document.getElementById("search-results");
  if (!box || !list) { return; }
  var index = null;
  box.addEventListener("input", function () {
    var words = box.value.toLowerCase().split(/\s+/).filter(Boolean);
    if (!index) {
      fetch("search.json").then(function (r) { return r.json(); }).then(function (data) { index = data; show(words); });
    } else { show(words); }
  });
  function show(words) {
    list.innerHTML = "";
    if (!words.length) { return; }
    index.filter(function (entry) {
      return words.every(function (w) { return entry.text.indexOf(w) >= 0; });
    }).slice(0, 12).forEach(function (entry) {
      var li = document.createElement("li"), a = document.createElement("a"), small = document.createElement("small");
      a.href = entry.url; a.textContent = entry.heading; small.textContent = entry.chapter;
      li.appendChild(a); li.appendChild(small); list.appendChild(li);
    });
    if (!list.children.length) { list.innerHTML = "<li><small>no section mentions that</small></li>"; }
  }
})();
