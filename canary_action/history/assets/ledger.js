// rlhf-canary history: the cost ledger's sums from the chosen date on (the page shows the total without this).
"use strict";
(function () {
  const since = document.getElementById("ledger-since");
  if (!since) return;
  const rows = Array.from(document.querySelectorAll("table.ledger tbody tr"));
  function update() {
    const from = since.value || since.min;
    const shown = rows.filter(function (row) { return row.dataset.date >= from; });
    rows.forEach(function (row) { row.hidden = row.dataset.date < from; });
    document.getElementById("ledger-count").textContent = String(shown.length);
    document.querySelectorAll("td[data-sum]").forEach(function (cell) {
      let total = 0, squares = 0, halves = 0;
      shown.forEach(function (row) {
        const effect = row.querySelector('td[data-check="' + cell.dataset.sum + '"]');
        if (!effect || effect.dataset.effect === undefined) return;
        total += Number(effect.dataset.effect);
        if (effect.dataset.half !== "") { squares += Number(effect.dataset.half) ** 2; halves += 1; }
      });
      const sign = total >= 0 ? "+" : "";
      cell.textContent = sign + total.toFixed(1) + " %" + (halves ? " \u00b1 " + Math.sqrt(squares).toFixed(1) : "");
    });
  }
  since.addEventListener("input", update);
  since.addEventListener("change", update);
  update();
})();
