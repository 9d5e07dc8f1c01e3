// The frame page's banner follows the archived page below it: when the frame loads another
// page, learn its address, ask the server what capture that is, show it, and put its
// /<ts>/<url> address in the address bar (replaceState: the frame's own navigation is
// already in the history). The archived pages come from another origin (origins.py): the
// banner asks the frame's seal (seal.js) on a port of its own, and shows only what the
// server says of the address it is told, never anything the page says of itself.
"use strict";
(() => {
  const frame = document.getElementById("mirror-frame");
  const framed = /^\/\d{1,14}mp_\//;
  const byId = (id) => document.getElementById(id);
  let asked = 0;  // the latest question; older answers are dropped

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
    document.title = String(title || info.title || info.shown).slice(0, 300);
    if (location.pathname + location.search !== info.top) {
      history.replaceState(null, "", info.top);
    }
  };

  const notArchived = (path) => {
    byId("mb-url").textContent = path ? decodeURIComponent(path.replace(framed, "")) : "";
    byId("mb-time").textContent = "not in this archive";
    byId("mb-run").textContent = "";
    for (const id of ["mb-prev", "mb-next"]) link(id, null);
  };

  const showPath = async (path, title, question) => {
    if (typeof path !== "string" || !framed.test(path)) return notArchived("");
    const answer = await fetch("/_mirror/capture?path=" + encodeURIComponent(path),
                               {cache: "no-store"});
    if (question !== asked) return;
    if (answer.ok) show(await answer.json(), title); else notArchived(path);
  };

  // the frame's seal answers on the port it is given; a page without one (an error page,
  // one of the server's own pages) never does, and the banner then says so, or does what
  // `silence` says
  const ask = (silence = () => notArchived("")) => {
    const question = ++asked;
    const channel = new MessageChannel();
    const silent = setTimeout(() => { if (question === asked) silence(); }, 3000);
    channel.port1.onmessage = (e) => {
      clearTimeout(silent);
      channel.port1.close();
      const said = e.data || {};
      if (question === asked) showPath(said.path, typeof said.title === "string" ? said.title : "", question);
    };
    frame.contentWindow.postMessage({mirror: "where"}, new URL(frame.src).origin,
                                    [channel.port2]);
  };

  const update = () => {
    let where, title;
    try {  // the same origin (a server without a second port): read it
      where = frame.contentWindow.location;
      title = frame.contentDocument.title;
    } catch (e) {
      ask();
      return;
    }
    if (where.protocol === "about:") return;
    const path = where.pathname + where.search;
    if (!framed.test(path)) {
      // an archived page showing its archived path (static/fetch.js: /app/1 for
      // /<ts>mp_/http://site/app/1), whose seal says where it was loaded from; else one of
      // the server's own pages, which needs no banner
      const href = where.href;
      ask(() => location.assign(href));
      return;
    }
    showPath(path, title, ++asked);
  };

  frame.addEventListener("load", update);
  try {
    if (frame.contentDocument && frame.contentDocument.readyState === "complete") update();
  } catch (e) { /* another origin: its load event is still to come, or was missed */ }
})();
