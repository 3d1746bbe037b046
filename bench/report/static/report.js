// bench report: draw the plotly figures embedded as JSON, and make tables sortable.
// No network: plotly comes from assets/plotly.min.js next to this file.
(function () {
  "use strict";

  function drawFigures() {
    var blocks = document.querySelectorAll('script[type="application/json"][data-figure]');
    if (!blocks.length) return;
    if (typeof Plotly === "undefined") {
      blocks.forEach(function (block) {
        var target = document.getElementById(block.dataset.figure);
        if (target) {
          target.textContent = "Chart not drawn: assets/plotly.min.js did not load.";
          target.className += " render-error";
        }
      });
      throw new Error("bench report: Plotly is not loaded (assets/plotly.min.js missing?)");
    }
    blocks.forEach(function (block) {
      var figure = JSON.parse(block.textContent);
      if (figure.shared) expandShared(figure);
      var layout = figure.layout || {};
      if (window.BENCH_PLOTLY_TEMPLATE && !layout.template) layout.template = window.BENCH_PLOTLY_TEMPLATE;
      Plotly.newPlot(block.dataset.figure, figure.data, layout,
                     {responsive: true, displaylogo: false});
    });
  }

  // Arrays several traces hold alike are written once, under figure.shared; a trace or an
  // axis names one as "@name" (bench.report.chart.Chart.shared).
  var SHARED_KEYS = ["x", "y", "customdata", "text", "categoryarray", "tickvals", "ticktext"];
  function expandShared(figure) {
    var targets = (figure.data || []).slice();
    Object.keys(figure.layout || {}).forEach(function (key) {
      if (/^[xy]axis/.test(key)) targets.push(figure.layout[key]);
    });
    targets.forEach(function (target) {
      SHARED_KEYS.forEach(function (key) {
        var value = target[key];
        if (typeof value === "string" && value.charAt(0) === "@" &&
            Object.prototype.hasOwnProperty.call(figure.shared, value.slice(1))) {
          target[key] = figure.shared[value.slice(1)];
        }
      });
    });
    delete figure.shared;
  }

  function sortKey(cell) {
    var raw = cell.getAttribute("data-sort");
    if (raw === null) raw = cell.textContent;
    var num = parseFloat(raw);
    return isNaN(num) && raw !== "-Infinity" && raw !== "Infinity" ? raw.toLowerCase()
      : (raw === "-Infinity" ? -Infinity : raw === "Infinity" ? Infinity : num);
  }

  function makeSortable(table) {
    var headers = table.querySelectorAll("thead th");
    headers.forEach(function (th, column) {
      th.addEventListener("click", function () {
        var ascending = th.getAttribute("aria-sort") !== "ascending";
        headers.forEach(function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = sortKey(a.cells[column]), y = sortKey(b.cells[column]);
          if (typeof x !== typeof y) { x = String(x); y = String(y); }
          return (x < y ? -1 : x > y ? 1 : 0) * (ascending ? 1 : -1);
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  }

  document.querySelectorAll("table.sortable").forEach(makeSortable);
  drawFigures();
})();
