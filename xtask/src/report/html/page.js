// report.html's script (ours, no library): sort any table by any column, turn servers on and
// off in the tables and figures, and show a mark's value and interval on hover or tap.
"use strict";
(function () {
  // A cell's sort key: its first number, scaled by its unit, so that "1.5 ms" sorts above
  // "900 µs" and "12.3k" above "950"; the reference is 1×, a "~" cell its ratio; "–" and
  // "failed" last.
  var UNITS = { "k": 1e3, "M": 1e6, "ns": 1e-3, "µs": 1, "us": 1, "ms": 1e3, "s": 1e6,
    "B": 1, "KiB": 1024, "MiB": 1048576, "GiB": 1073741824 };
  function key(text) {
    var t = text.trim();
    if (t === "reference" || t === "best") return 1;
    // "~ (0.93× [0.90–0.97])": no verdict, its ratio after the reference's and the verdicts'.
    if (t.charAt(0) === "~") {
      var r = t.match(/\(\s*(-?\d+(?:\.\d+)?)×/);
      return (r ? parseFloat(r[1]) : 1) + 1e-6;
    }
    var m = t.match(/-?\d+(?:[.,]\d+)*(?:e-?\d+)?/);
    if (!m) return null;
    var v = parseFloat(m[0].replace(/,/g, ""));
    var rest = t.slice(m.index + m[0].length).trim().split(/[\s\[(†‡§×%]/)[0];
    if (Object.prototype.hasOwnProperty.call(UNITS, rest)) v *= UNITS[rest];
    return v;
  }
  function sortBy(table, col, th) {
    var body = table.tBodies[0];
    if (!body) return;
    var asc = th.getAttribute("aria-sort") !== "ascending";
    var heads = table.tHead ? table.tHead.rows[0].cells : [];
    for (var i = 0; i < heads.length; i++) heads[i].removeAttribute("aria-sort");
    th.setAttribute("aria-sort", asc ? "ascending" : "descending");
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[col] ? a.cells[col].textContent : "";
      var y = b.cells[col] ? b.cells[col].textContent : "";
      var kx = key(x), ky = key(y);
      var r;
      if (kx === null && ky === null) r = x.localeCompare(y);
      else if (kx === null) return 1;
      else if (ky === null) return -1;
      else r = kx - ky;
      return asc ? r : -r;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  document.querySelectorAll("main table").forEach(function (table) {
    if (!table.tHead) return;
    var heads = table.tHead.rows[0].cells;
    for (var i = 0; i < heads.length; i++) {
      (function (col, th) {
        th.title = "sort by this column";
        th.addEventListener("click", function () { sortBy(table, col, th); });
      })(i, heads[i]);
    }
  });

  // Servers on and off: the figures' rows carry data-server; a table row is a server's when
  // its first cell (or, in a comparison, its second) names it.
  var boxes = document.querySelectorAll("nav#servers input[data-toggle]");
  function apply() {
    var off = {};
    boxes.forEach(function (b) { if (!b.checked) off[b.getAttribute("data-toggle")] = true; });
    document.querySelectorAll("[data-server]").forEach(function (e) {
      e.classList.toggle("hidden", !!off[e.getAttribute("data-server")]);
    });
    document.querySelectorAll("main tbody tr").forEach(function (tr) {
      var c = tr.cells[0] ? tr.cells[0].textContent.trim() : "";
      tr.classList.toggle("hidden", !!off[c]);
    });
  }
  boxes.forEach(function (b) { b.addEventListener("change", apply); });
  document.querySelectorAll("nav#servers button[data-all]").forEach(function (btn) {
    btn.addEventListener("click", function () {
      var on = btn.getAttribute("data-all") === "1";
      boxes.forEach(function (b) { b.checked = on; });
      apply();
    });
  });

  // A mark's value and interval, on hover or tap.
  var tip = document.getElementById("tip");
  function show(e) {
    var m = e.target.closest ? e.target.closest("svg[data-tip]") : null;
    if (!m) { tip.hidden = true; return; }
    tip.textContent = m.getAttribute("data-tip");
    tip.hidden = false;
    var x = Math.min(e.clientX + 12, window.innerWidth - tip.offsetWidth - 4);
    tip.style.left = Math.max(4, x) + "px";
    tip.style.top = (e.clientY + 14) + "px";
  }
  document.addEventListener("mousemove", show);
  document.addEventListener("click", show);
})();
