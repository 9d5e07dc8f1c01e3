// mirror's seal: the first script of every archived page (O2). No Content-Security-Policy
// directive that Chromium enforces stops WebRTC's UDP (STUN/TURN go to any host) or
// speculation rules (prefetch and prerender go to any site), so this takes them away from
// the page and from every same-origin window it makes (about:blank and srcdoc frames,
// window.open('')) before any archived script runs.
// It also keeps the page where it is: no window opened and no navigation away from the
// archive without the person's click (the Navigation API's navigate event, cancelled),
// and it answers the banner above it, which asks where the frame is (see answerBanner).
(() => {
  "use strict";
  const apply = Reflect.apply;
  const active = () => { try { return navigator.userActivation.isActive; } catch (e) { return false; } };
  const RTC = ["RTCPeerConnection", "webkitRTCPeerConnection", "RTCDataChannel",
    "RTCSessionDescription", "RTCIceCandidate", "RTCRtpSender", "RTCRtpReceiver",
    "RTCRtpTransceiver", "RTCIceTransport", "RTCDtlsTransport", "RTCSctpTransport",
    "RTCCertificate", "RTCRtpScriptTransform", "RTCEncodedAudioFrame",
    "RTCEncodedVideoFrame", "RTCError", "RTCErrorEvent", "RTCPeerConnectionIceEvent",
    "RTCTrackEvent", "RTCDataChannelEvent", "RTCDTMFSender", "RTCStatsReport"];
  const SEAL = document.currentScript ? document.currentScript.outerHTML : "";
  const done = new WeakSet();  // prototypes already wrapped
  const define = (obj, name, value) => {
    try {
      Object.defineProperty(obj, name, {value, writable: false, configurable: false});
    } catch (e) { /* already sealed */ }
  };
  const speculation = (v) => String(v).trim().toLowerCase() === "speculationrules";
  const wrapSetter = (proto, name, change) => {
    const d = proto && Object.getOwnPropertyDescriptor(proto, name);
    if (!d || !d.set || !d.configurable) return;  // none, or sealed already
    Object.defineProperty(proto, name, {...d, configurable: false, set(v) {
      d.set.call(this, change(this, v));
    }});
  };
  const wrapGetter = (proto, name, after) => {
    const d = proto && Object.getOwnPropertyDescriptor(proto, name);
    if (!d || !d.get || !d.configurable) return;
    Object.defineProperty(proto, name, {...d, configurable: false, get() {
      return after(d.get.call(this));
    }});
  };
  const wrapMethod = (proto, name, around) => {
    const d = proto && Object.getOwnPropertyDescriptor(proto, name);
    if (!d || typeof d.value !== "function" || !d.configurable) return;
    const f = d.value;
    define(proto, name, function (...args) { return around(this, f, args); });
  };
  // a value for an attribute: never a speculation-rules script, a srcdoc sealed too
  const value = (el, name, v) => {
    const n = String(name).toLowerCase();
    if (n === "type" && el.localName === "script" && speculation(v)) return "text/plain";
    if (n === "srcdoc" && el.localName === "iframe") return SEAL + String(v);
    return v;
  };
  // navigation away from the archive (another origin; from file://, anything but a file)
  // only on the person's click: the page keeps its data where it was archived (O2)
  const stay = (w) => {
    const nav = w.navigation;
    if (!nav || typeof nav.addEventListener !== "function") return;
    const here = w.location.protocol;
    nav.addEventListener("navigate", (e) => {
      if (!e.cancelable || e.userInitiated || active()) return;
      let to;
      try { to = new URL(e.destination.url); } catch (x) { e.preventDefault(); return; }
      const inside = here === "file:" ? to.protocol === "file:"
        : to.origin === w.location.origin || to.protocol === "about:";
      if (!inside) e.preventDefault();
    });
  };
  // the banner above this frame (another origin) asks where the frame is, with a port to
  // answer on; this listener is the first on the window, so no archived script sees the
  // question or the port, and the address is the one the page was loaded from
  const answerBanner = () => {
    const up = window.parent;
    if (up === window) return;
    const where = location.pathname + location.search;
    const getter = (name) => Object.getOwnPropertyDescriptor(MessageEvent.prototype, name).get;
    const [data, source, ports] = ["data", "source", "ports"].map(getter);
    const stop = Event.prototype.stopImmediatePropagation;
    const send = MessagePort.prototype.postMessage;
    const title = Object.getOwnPropertyDescriptor(Document.prototype, "title").get;
    addEventListener("message", (e) => {
      const asked = apply(data, e, []);
      const port = apply(ports, e, [])[0];
      if (apply(source, e, []) !== up || !asked || asked.mirror !== "where" || !port) return;
      apply(stop, e, []);
      apply(send, port, [{path: where, title: apply(title, document, [])}]);
    }, true);
  };
  let seal;
  const sealFrames = (w) => {
    try {
      for (let i = 0; i < w.frames.length; i++) seal(w.frames[i]);
    } catch (e) { /* cross-origin */ }
  };
  seal = (w) => {
    try {
      if (!w || !w.document) return w;
    } catch (e) {
      return w;  // another origin: its own server seals it
    }
    for (const name of RTC) define(w, name, undefined);
    const E = w.Element && w.Element.prototype;
    if (!E || done.has(E)) return w;
    done.add(E);
    for (const C of ["HTMLIFrameElement", "HTMLFrameElement", "HTMLObjectElement"]) {
      const p = w[C] && w[C].prototype;
      wrapGetter(p, "contentWindow", seal);
      wrapGetter(p, "contentDocument", (d) => { if (d) seal(d.defaultView); return d; });
    }
    wrapSetter(w.HTMLScriptElement && w.HTMLScriptElement.prototype, "type",
      (el, v) => value(el, "type", v));
    wrapSetter(w.HTMLIFrameElement && w.HTMLIFrameElement.prototype, "srcdoc",
      (el, v) => value(el, "srcdoc", v));
    wrapMethod(E, "setAttribute", (el, f, [n, v]) => f.call(el, n, value(el, n, v)));
    wrapMethod(E, "setAttributeNS", (el, f, [ns, n, v]) => f.call(el, ns, n, value(el, n, v)));
    const A = w.Attr && w.Attr.prototype;
    for (const name of ["value", "nodeValue", "textContent"]) {
      wrapSetter(A, name, (attr, v) => attr.ownerElement
        ? value(attr.ownerElement, attr.name, v) : v);
    }
    wrapMethod(E, "setAttributeNode", (el, f, [a]) => {
      a.value = value(el, a.name, a.value); return f.call(el, a); });
    // a window only on a click (the browser's popup blocker may be off), sealed too
    wrapMethod(w, "open", (win, f, args) => active() ? seal(apply(f, win, args)) : null);
    stay(w);
    // anything that inserts nodes may add a frame: seal the frames after it
    const after = (p, names) => { for (const n of names) {
      wrapMethod(p, n, (node, f, args) => { const r = f.apply(node, args); sealFrames(w); return r; });
    } };
    after(w.Node && w.Node.prototype, ["appendChild", "insertBefore", "replaceChild"]);
    after(E, ["append", "prepend", "before", "after", "replaceWith", "insertAdjacentElement",
              "insertAdjacentHTML", "replaceChildren"]);
    after(w.Document && w.Document.prototype, ["write", "writeln"]);
    for (const n of ["innerHTML", "outerHTML"]) {
      wrapSetter(E, n, (el, v) => { w.queueMicrotask(() => sealFrames(w)); return v; });
    }
    // parser-made elements: a speculation-rules script loses its type, a srcdoc is sealed
    new w.MutationObserver((records) => {
      for (const r of records) for (const node of r.addedNodes) {
        if (node.nodeType !== 1) continue;
        for (const el of [node, ...node.querySelectorAll("script,iframe")]) {
          if (el.localName === "script" && speculation(el.getAttribute("type"))) {
            el.setAttribute("type", "text/plain");
            el.remove();
          }
          if (el.localName === "iframe" && el.hasAttribute("srcdoc")
              && !el.getAttribute("srcdoc").startsWith(SEAL)) {
            el.setAttribute("srcdoc", el.getAttribute("srcdoc"));
          }
        }
      }
      sealFrames(w);
    }).observe(w.document, {childList: true, subtree: true});
    return w;
  };
  seal(window);
  answerBanner();
})();
