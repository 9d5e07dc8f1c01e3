// The search of an exported site, from file:// with no server. search-index.js, loaded
// before this script, sets MIRROR_SEARCH: one [href, url, title, text] per page.
// Every word of the query must start a word of the page's title or text (case and accents
// ignored); pages whose titles hold more of the words come first, then those with more hits.
"use strict";
(function () {
  const MAX_SHOWN = 100;
  const MAX_COUNT = 1000; // hits counted per word and page: enough to rank, bounded time
  const BEFORE = 60; // characters of a snippet before the first hit, and after it
  const AFTER = 180;
  const MARKS = /\p{M}+/gu;
  const NOT_WORD = /[^\p{L}\p{N}]+/u;
  const WORD_CHAR = /[\p{L}\p{N}]/u;
  // scripts written without spaces between words: there a word may match anywhere
  const UNSPACED = /^[\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}\p{sc=Thai}\p{sc=Lao}\p{sc=Khmer}\p{sc=Myanmar}]/u;

  const pages = Array.isArray(window.MIRROR_SEARCH) ? window.MIRROR_SEARCH : [];
  const input = document.getElementById("q");
  const status = document.getElementById("status");
  const list = document.getElementById("results");
  let folded = null; // per page: [folded title, folded text], made at the first search

  // Lower case without accents; NFC again so that Hangul stays one character a syllable.
  function fold(s) {
    return s.normalize("NFD").replace(MARKS, "").normalize("NFC").toLowerCase();
  }

  function foldAll() {
    if (folded === null) {
      folded = pages.map(function (p) { return [fold(p[2] || p[1]), fold(p[3])]; });
    }
    return folded;
  }

  // Where `term` starts a word of `hay` (anywhere, for a script without spaces).
  function hits(hay, term, limit) {
    const out = [];
    const anywhere = UNSPACED.test(term);
    for (let i = hay.indexOf(term); i !== -1 && out.length < limit; i = hay.indexOf(term, i + 1)) {
      if (anywhere || i === 0 || !WORD_CHAR.test(hay[i - 1])) out.push(i);
    }
    return out;
  }

  function terms(query) {
    return Array.from(new Set(fold(query).split(NOT_WORD).filter(Boolean)));
  }

  function search(words) {
    const found = [];
    foldAll().forEach(function (f, n) {
      let inTitle = 0;
      let total = 0;
      for (const word of words) {
        const a = hits(f[0], word, MAX_COUNT).length;
        const b = hits(f[1], word, MAX_COUNT).length;
        if (!a && !b) return;
        inTitle += a ? 1 : 0;
        total += a + b;
      }
      found.push({ n: n, inTitle: inTitle, total: total });
    });
    return found.sort(function (x, y) {
      return y.inTitle - x.inTitle || y.total - x.total || x.n - y.n;
    });
  }

  // The folded text in which to find what to mark, and where each of its positions is in
  // `text`. Nearly every text keeps its length when folded, position for position; the rare
  // other one (a character that folds into two) is folded again a character at a time.
  function aligned(text, foldedText) {
    if (foldedText.length === text.length) {
      return { hay: foldedText, at: function (i) { return i; } };
    }
    let hay = "";
    const map = [];
    for (let i = 0; i < text.length;) {
      const ch = String.fromCodePoint(text.codePointAt(i));
      const f = fold(ch);
      hay += f;
      for (let k = 0; k < f.length; k++) map.push(i);
      i += ch.length;
    }
    map.push(text.length);
    return { hay: hay, at: function (i) { return map[i]; } };
  }

  // `text` from `start` to `end` (positions in view.hay) as DOM nodes, the words marked.
  function marked(text, view, words, start, end) {
    const spans = [];
    for (const word of words) {
      for (const i of hits(view.hay, word, MAX_COUNT)) {
        if (i >= start && i + word.length <= end) spans.push([i, i + word.length]);
      }
    }
    spans.sort(function (x, y) { return x[0] - y[0]; });
    const frag = document.createDocumentFragment();
    let pos = start;
    for (const [s, e] of spans) {
      if (s < pos) continue; // overlaps the one before
      frag.append(text.slice(view.at(pos), view.at(s)));
      const mark = document.createElement("mark");
      mark.textContent = text.slice(view.at(s), view.at(e));
      frag.append(mark);
      pos = e;
    }
    frag.append(text.slice(view.at(pos), view.at(end)));
    return frag;
  }

  // A window of the text around the first hit of any of the words, cut at spaces.
  function snippetRange(hay, words) {
    let first = hay.length;
    for (const word of words) {
      const h = hits(hay, word, 1);
      if (h.length && h[0] < first) first = h[0];
    }
    if (first === hay.length) first = 0; // the words are in the title only
    let start = Math.max(0, first - BEFORE);
    let end = Math.min(hay.length, first + AFTER);
    const space = hay.indexOf(" ", start);
    if (start > 0 && space !== -1 && space < first) start = space + 1;
    const last = hay.lastIndexOf(" ", end);
    if (end < hay.length && last > first) end = last;
    return [start, end];
  }

  function entry(hit, words) {
    const page = pages[hit.n];
    const title = page[2] || page[1];
    const li = document.createElement("li");
    const a = document.createElement("a");
    a.href = page[0];
    const titleView = aligned(title, folded[hit.n][0]);
    a.append(marked(title, titleView, words, 0, titleView.hay.length));
    const url = document.createElement("div");
    url.className = "u";
    url.textContent = page[1];
    const view = aligned(page[3], folded[hit.n][1]);
    const [start, end] = snippetRange(view.hay, words);
    const snippet = document.createElement("p");
    snippet.className = "s";
    snippet.append(start > 0 ? "… " : "", marked(page[3], view, words, start, end),
                   end < view.hay.length ? " …" : "");
    li.append(a, url, snippet);
    return li;
  }

  function show() {
    const words = terms(input.value);
    list.replaceChildren();
    list.dataset.query = input.value; // what the list answers (a test waits for it)
    if (!Array.isArray(window.MIRROR_SEARCH)) {
      status.textContent = "The index of the pages (search-index.js) did not load.";
      return;
    }
    if (!words.length) {
      status.textContent = pages.length + (pages.length === 1 ? " page" : " pages")
        + " to search.";
      return;
    }
    const found = search(words);
    const shown = found.slice(0, MAX_SHOWN);
    list.replaceChildren(...shown.map(function (hit) { return entry(hit, words); }));
    status.textContent = found.length === 0 ? "No page has all of these words."
      : found.length + (found.length === 1 ? " page" : " pages")
        + (found.length > shown.length ? ", the first " + shown.length + " shown." : ".");
  }

  let timer = 0;
  input.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(show, pages.length > 2000 ? 250 : 50);
  });
  const asked = new URLSearchParams(location.search).get("q");
  if (asked) input.value = asked;
  show();
})();
