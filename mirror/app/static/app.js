// Live rows and jobs from /events (server-sent events); confirmation of risky actions.
(() => {
  "use strict";
  document.addEventListener("submit", (event) => {
    const question = event.target.dataset.confirm;
    if (question && !window.confirm(question)) event.preventDefault();
  });
  const meta = document.querySelector('meta[name="sse"]');
  if (!meta || !window.EventSource) return;
  const events = new EventSource(meta.content);
  events.addEventListener("row", (event) => {
    const data = JSON.parse(event.data);
    const old = document.getElementById("site-" + data.id);
    if (!old) return;
    const holder = document.createElement("tbody");
    holder.innerHTML = data.html;  // rendered and escaped by the server
    const row = holder.querySelector("tr");
    if (row) old.replaceWith(row);
  });
  events.addEventListener("jobs", (event) => {
    const box = document.getElementById("jobs");
    if (box) box.innerHTML = JSON.parse(event.data).html;
  });
  events.addEventListener("library", () => window.location.reload());
})();
