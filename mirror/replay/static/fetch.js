// mirror serve's second script of every archived page, after the seal: the page's own
// requests made by script (fetch(), XMLHttpRequest, navigator.sendBeacon, EventSource) and
// the addresses it gives history.pushState/replaceState go to this server's copy of the
// archived URL (/<timestamp><modifier>/<url>), on this server's own origin. An absolute URL
// of the archived site, a path from its root ('/api/items') or another site's URL is
// rewritten before the browser sees it; the policy (default-src 'self') stops anything
// the rewriting misses, so nothing leaves for the live web. The server answers a URL it did
// not archive as asked from the closest capture of the same path with the cache-busting
// parameters ignored (fuzzy.py).
(() => {
  "use strict";
  const HERE = /^\/(\d{1,14})(mp_|id_)?\/(.+)$/s.exec(location.pathname);
  if (!HERE) return;  // not an archived page of this server
  const [, STAMP, MODIFIER = ""] = HERE;
  const squeezed = (u) => u.replace(/^([a-z][a-z0-9+.-]*):\/+/i, "$1://");
  const PAGE = squeezed(HERE[3] + location.search);
  const SELF = location.origin;
  const IS_REPLAY = /^\/\d{1,14}(?:mp_|id_)?\/[a-z][a-z0-9+.-]*:\//i;
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
      url = new URL(url.pathname + url.search + url.hash, PAGE);  // from the site's root
    }
    return `${SELF}/${STAMP}${MODIFIER}/${url.href}`;
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
  for (const name of ["pushState", "replaceState"]) {
    const f = History.prototype[name];
    History.prototype[name] = function (state, title, url) {
      return url === undefined || url === null
        ? f.call(this, state, title) : f.call(this, state, title, archived(url));
    };
  }
})();
