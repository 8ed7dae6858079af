// The index's filter and sort. The table reads without this script; it only hides rows and
// reorders them, and never builds markup from the data.
(function () {
  "use strict";
  var table = document.getElementById("attempt-table");
  var form = document.getElementById("filters");
  if (!table || !form) { return; }
  form.hidden = false;
  form.addEventListener("submit", function (event) { event.preventDefault(); });
  var body = table.tBodies[0];
  var text = document.getElementById("filter-text");
  var status = document.getElementById("filter-status");
  var shown = document.getElementById("shown-count");
  var rows = Array.prototype.slice.call(body.rows);
  var haystack = rows.map(function (row) { return row.textContent.toLowerCase(); });

  function apply() {
    var words = text.value.toLowerCase().split(/\s+/).filter(Boolean);
    var wanted = status.value;
    var count = 0;
    rows.forEach(function (row, i) {
      var ok = (!wanted || row.getAttribute("data-status") === wanted) &&
        words.every(function (w) { return haystack[i].indexOf(w) !== -1; });
      row.hidden = !ok;
      if (ok) { count += 1; }
    });
    shown.textContent = count + " of " + rows.length + " shown";
  }

  function sortBy(header, column) {
    var ascending = header.getAttribute("aria-sort") !== "ascending";
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (cell) { cell.removeAttribute("aria-sort"); });
    header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var order = rows.map(function (row, i) { return [row.cells[column].textContent.trim().toLowerCase(), i]; });
    order.sort(function (a, b) {
      if (a[0] === b[0]) { return a[1] - b[1]; }
      return (a[0] < b[0] ? -1 : 1) * (ascending ? 1 : -1);
    });
    var fragment = document.createDocumentFragment();
    order.forEach(function (pair) { fragment.appendChild(rows[pair[1]]); });
    body.appendChild(fragment);
  }

  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (header, column) {
    if (header.hasAttribute("data-sort")) {
      header.tabIndex = 0;
      header.addEventListener("click", function () { sortBy(header, column); });
      header.addEventListener("keydown", function (e) { if (e.key === "Enter") { sortBy(header, column); } });
    }
  });
  text.addEventListener("input", apply);
  status.addEventListener("change", apply);
  apply();
}());
