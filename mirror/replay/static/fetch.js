// mirror serve's second script of every archived page, after the seal. Two things make a
// page built by scripts (a single-page app) work from the archive:
// 1. The page's address becomes its archived path, on this server's archived-pages origin
//    (/2999mp_/http://site/app/1 shows as /app/1): the page's router reads location.pathname
//    and would find nothing at /2999mp_/... . A cookie (COOKIE) tells the server which site
//    and time such a path belongs to, for a reload or a request with no Referer.
// 2. The page's own requests made by script (fetch(), XMLHttpRequest, navigator.sendBeacon,
//    EventSource) go to this server's copy of the archived URL (/<timestamp><modifier>/<url>):
//    a path from the site's root ('/api/items'), an absolute URL of the archived site or of
//    another one is rewritten before the browser sees it; the policy (default-src 'self')
//    stops anything the rewriting misses, so nothing leaves for the live web. The server
//    answers a URL it did not archive as asked from the closest capture of the same path
//    with the cache-busting parameters ignored (fuzzy.py).
(() => {
  "use strict";
  const HERE = /^\/(\d{1,14})(mp_|id_)?\/(.+)$/s.exec(location.pathname);
  if (!HERE) return;  // not an archived page of this server
  const [, STAMP, MODIFIER = ""] = HERE;
  const squeezed = (u) => u.replace(/^([a-z][a-z0-9+.-]*):\/+/i, "$1://");
  let page;
  try {
    page = new URL(squeezed(HERE[3] + location.search + location.hash));
  } catch (e) {
    return;
  }
  const SITE = page.origin;
  const SELF = location.origin;
  const IS_REPLAY = /^\/\d{1,14}(?:mp_|id_)?\/[a-z][a-z0-9+.-]*:\//i;
  document.cookie = `mirror_at=${encodeURIComponent(`${STAMP}${MODIFIER} ${SITE}`)}; ` +
    "path=/; SameSite=Strict";
  // the address in this archive of a URL a script names, or the URL itself when it is not
  // a web address (data:, blob:, about:)
  const archived = (value) => {
    let url;
    try {
      url = new URL(String(value), document.baseURI);
    } catch (e) {
      return value;
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") return value;
    if (url.origin === SELF) {
      if (IS_REPLAY.test(url.pathname)) return url.href;  // already an archive address
      url = new URL(url.pathname + url.search + url.hash, SITE);  // a path of the site
    }
    return `${SELF}/${STAMP}${MODIFIER}/${url.href}`;
  };
  // an address for history: the archived site's own path, on this origin
  const local = (value) => {
    try {
      const url = new URL(String(value), document.baseURI);
      return url.origin === SITE ? url.pathname + url.search + url.hash : value;
    } catch (e) {
      return value;
    }
  };
  const fetch0 = window.fetch;
  if (typeof fetch0 === "function") {
    window.fetch = function (input, init) {
      if (input instanceof Request) {
        return fetch0.call(this, new Request(archived(input.url), input), init);
      }
      return fetch0.call(this, archived(input), init);
    };
  }
  const XHR = window.XMLHttpRequest && window.XMLHttpRequest.prototype;
  if (XHR) {
    const open0 = XHR.open;
    XHR.open = function (method, url, ...rest) {
      return open0.call(this, method, archived(url), ...rest);
    };
  }
  if (navigator.sendBeacon) {
    const beacon0 = navigator.sendBeacon;
    navigator.sendBeacon = function (url, data) { return beacon0.call(this, archived(url), data); };
  }
  if (window.EventSource) {
    const ES = window.EventSource;
    window.EventSource = function (url, options) { return new ES(archived(url), options); };
    window.EventSource.prototype = ES.prototype;
  }
  const states = {};
  for (const name of ["pushState", "replaceState"]) {
    const f = states[name] = History.prototype[name];
    History.prototype[name] = function (state, title, url) {
      return url === undefined || url === null
        ? f.call(this, state, title) : f.call(this, state, title, local(url));
    };
  }
  states.replaceState.call(history, history.state, "", page.pathname + page.search + page.hash);
})();
