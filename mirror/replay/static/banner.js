// The frame page's banner follows the archived page below it: when the frame loads another
// page, ask the server what capture that is, show it, and put its /<ts>/<url> address in
// the address bar (replaceState: the frame's own navigation is already in the history).
"use strict";
(() => {
  const frame = document.getElementById("mirror-frame");
  const framed = /^\/\d{1,14}mp_\//;
  const byId = (id) => document.getElementById(id);

  const link = (id, href) => {
    const a = byId(id);
    if (href) a.setAttribute("href", href); else a.removeAttribute("href");
  };

  const show = (info, title) => {
    byId("mb-url").textContent = info.shown;
    byId("mb-url").title = info.url;
    byId("mb-time").textContent = info.time;
    byId("mb-time").setAttribute("datetime", info.iso);
    byId("mb-run").textContent = info.run;
    link("mb-prev", info.previous);
    link("mb-next", info.next);
    link("mb-history", info.history);
    byId("mb-history").textContent = info.captures;
    document.title = title || info.title || info.shown;
    if (location.pathname + location.search !== info.top) {
      history.replaceState(null, "", info.top);
    }
  };

  const notArchived = (path) => {
    byId("mb-url").textContent = decodeURIComponent(path.replace(framed, ""));
    byId("mb-time").textContent = "not in this archive";
    byId("mb-run").textContent = "";
    for (const id of ["mb-prev", "mb-next"]) link(id, null);
  };

  const update = async () => {
    let where, title;
    try {  // same origin; an archived page can only lead elsewhere inside this server
      where = frame.contentWindow.location;
      title = frame.contentDocument.title;
    } catch (e) {
      return;
    }
    if (where.protocol === "about:") return;
    const path = where.pathname + where.search;
    if (!framed.test(path)) {  // one of the server's own pages: it needs no banner
      location.assign(where.href);
      return;
    }
    const answer = await fetch("/_mirror/capture?path=" + encodeURIComponent(path),
                               {cache: "no-store"});
    if (answer.ok) show(await answer.json(), title); else notArchived(path);
  };

  frame.addEventListener("load", update);
  if (frame.contentDocument && frame.contentDocument.readyState === "complete") update();
})();
