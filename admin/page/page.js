// The page refreshes its live part in place, asks before destructive actions and
// copies connection strings. Without JavaScript it still works: forms post, and a
// reload shows the new state.
"use strict";
(function () {
  const live = document.getElementById("live");
  document.addEventListener("click", (e) => {
    const b = e.target.closest("button");
    if (!b) return;
    if (b.dataset.confirm && !window.confirm(b.dataset.confirm)) {
      e.preventDefault();
      return;
    }
    if (b.classList.contains("copy")) {
      const input = b.parentElement.querySelector("input");
      input.select();
      if (navigator.clipboard) navigator.clipboard.writeText(input.value).catch(() => document.execCommand("copy"));
      else document.execCommand("copy");
      b.textContent = "copied";
      setTimeout(() => (b.textContent = "copy"), 1500);
    }
  });
  if (!live) return;
  if (window.location.search) window.history.replaceState(null, "", "/");
  let busy = false;
  async function refresh() {
    // Do not replace what the user is selecting or about to click.
    if (busy || document.hidden || live.contains(document.activeElement) && document.activeElement.tagName === "INPUT") return;
    busy = true;
    try {
      const r = await fetch("/ui/live", { credentials: "same-origin", cache: "no-store" });
      if (r.status === 401) window.location.reload();
      else if (r.ok) live.innerHTML = await r.text();
    } catch (_) {
      // The server may be restarting; try again on the next tick.
    } finally {
      busy = false;
    }
  }
  setInterval(refresh, Number(live.dataset.refresh) || 3000);
})();
