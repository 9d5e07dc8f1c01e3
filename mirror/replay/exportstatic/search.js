// The search of an exported site, from file:// with no server. search-index.js, loaded
// before this script, sets MIRROR_SEARCH: one [href, url shown, title, text, tokens, url,
// page key] per page (sitesearch.py).
// The order is the app's and `mirror search`'s (mirror/archive/searchrank.py): every term
// (a word, or a prefix*) must be a word of the title or text (case and accents ignored),
// scored by bm25 with the title's words weighing 4, best first, equal scores by URL; then
// each page once, its query-string variants folded under the best of them.
"use strict";
(function () {
  const MAX_SHOWN = 100;
  const BEFORE = 60; // characters of a snippet before the first hit, and after it
  const AFTER = 180;
  const K1 = 1.2; // bm25's constants, as FTS5 has them
  const B = 0.75;
  const TITLE_WEIGHT = 4.0;
  const BODY_WEIGHT = 1.0;
  const IDF_FLOOR = 1e-6;
  const MARKS = /\p{M}+/gu;
  const NOT_WORD = /[^\p{L}\p{N}\p{Co}]+/u;
  const WORD_CHAR = /[\p{L}\p{N}\p{Co}]/u;

  const pages = Array.isArray(window.MIRROR_SEARCH) ? window.MIRROR_SEARCH : [];
  const input = document.getElementById("q");
  const status = document.getElementById("status");
  const list = document.getElementById("results");
  let folded = null; // per page: [folded title, folded text], made at the first search
  let postings = null; // word -> [page, in title, in text, page, ...]
  let avgdl = 1;

  // Lower case without accents; NFC again so that Hangul stays one character a syllable.
  function fold(s) {
    return s.normalize("NFD").replace(MARKS, "").normalize("NFC").toLowerCase();
  }

  function words(folded) {
    return folded.split(NOT_WORD).filter(Boolean);
  }

  function counts(list) {
    const out = new Map();
    for (const w of list) out.set(w, (out.get(w) || 0) + 1);
    return out;
  }

  // The folded texts and the index of their words, made once, at the first search.
  function prepare() {
    if (folded !== null) return;
    folded = pages.map(function (p) { return [fold(p[2]), fold(p[3])]; });
    postings = new Map();
    let size = 0;
    folded.forEach(function (f, n) {
      size += pages[n][4];
      const title = counts(words(f[0]));
      const body = counts(words(f[1]));
      for (const w of new Set([...title.keys(), ...body.keys()])) {
        if (!postings.has(w)) postings.set(w, []);
        postings.get(w).push(n, title.get(w) || 0, body.get(w) || 0);
      }
    });
    avgdl = pages.length ? size / pages.length : 1;
  }

  // The query's terms: its words, folded; one ending in * is a prefix.
  function terms(query) {
    const out = [];
    for (const piece of query.trim().split(/\s+/)) {
      const prefix = piece.endsWith("*");
      const found = words(fold(prefix ? piece.slice(0, -1) : piece));
      found.forEach(function (w, i) {
        out.push({ word: w, prefix: prefix && i === found.length - 1 });
      });
    }
    const seen = new Set();
    return out.filter(function (t) {
      const key = t.word + (t.prefix ? "*" : "");
      return seen.has(key) ? false : (seen.add(key), true);
    });
  }

  // page -> f(t): the term's hits in the page, the title's weighing TITLE_WEIGHT.
  function frequencies(term) {
    const out = new Map();
    const keys = term.prefix ? Array.from(postings.keys()).filter(function (w) {
      return w.startsWith(term.word);
    }) : [term.word];
    for (const key of keys) {
      const list = postings.get(key) || [];
      for (let i = 0; i < list.length; i += 3) {
        const f = TITLE_WEIGHT * list[i + 1] + BODY_WEIGHT * list[i + 2];
        out.set(list[i], (out.get(list[i]) || 0) + f);
      }
    }
    return out;
  }

  // Every page holding all the terms, best first (searchrank.py's score and order).
  function search(query) {
    prepare();
    let scores = null;
    for (const term of query) {
      const freq = frequencies(term);
      let idf = Math.log((pages.length - freq.size + 0.5) / (freq.size + 0.5));
      if (idf <= 0) idf = IDF_FLOOR;
      const next = new Map();
      for (const [n, f] of freq) {
        if (scores !== null && !scores.has(n)) continue;
        const d = pages[n][4];
        const part = idf * (f * (K1 + 1)) / (f + K1 * (1 - B + B * d / avgdl));
        next.set(n, (scores === null ? 0 : scores.get(n)) + part);
      }
      scores = next;
    }
    const found = Array.from(scores || [], function ([n, score]) {
      return { n: n, score: score };
    });
    found.sort(function (x, y) {
      const a = pages[x.n][5];
      const b = pages[y.n][5];
      return y.score - x.score || (a < b ? -1 : a > b ? 1 : 0);
    });
    return foldPages(found);
  }

  // Each page once: a result whose page key was seen already joins that one's variants.
  function foldPages(found) {
    const byKey = new Map();
    const out = [];
    for (const hit of found) {
      const key = pages[hit.n][6];
      const first = byKey.get(key);
      if (first) {
        first.variants.push(hit.n);
      } else {
        hit.variants = [];
        byKey.set(key, hit);
        out.push(hit);
      }
    }
    return out;
  }

  // Where `term` is a word of `hay` (or starts one, for a prefix).
  function hits(hay, term, limit) {
    const out = [];
    const w = term.word;
    for (let i = hay.indexOf(w); i !== -1 && out.length < limit; i = hay.indexOf(w, i + 1)) {
      const starts = i === 0 || !WORD_CHAR.test(hay[i - 1]);
      const ends = term.prefix || i + w.length >= hay.length || !WORD_CHAR.test(hay[i + w.length]);
      if (starts && ends) out.push(i);
    }
    return out;
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

  function wordEnd(hay, i) {
    while (i < hay.length && WORD_CHAR.test(hay[i])) i++;
    return i;
  }

  // `text` from `start` to `end` (positions in view.hay) as DOM nodes, the words marked.
  function marked(text, view, words, start, end) {
    const spans = [];
    for (const term of words) {
      for (const i of hits(view.hay, term, 1000)) {
        const e = i + term.word.length;
        if (i >= start && e <= end) spans.push([i, term.prefix ? wordEnd(view.hay, e) : e]);
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
    li.append(a, url);
    if (hit.variants.length) li.append(variants(hit.variants));
    li.append(snippet);
    return li;
  }

  // "+2 variants", opening to a link to each.
  function variants(numbers) {
    const details = document.createElement("details");
    details.className = "variants";
    const summary = document.createElement("summary");
    summary.textContent = "+" + numbers.length + (numbers.length === 1 ? " variant" : " variants");
    details.append(summary);
    for (const n of numbers) {
      const a = document.createElement("a");
      a.href = pages[n][0];
      a.textContent = pages[n][1];
      const line = document.createElement("div");
      line.append(a);
      details.append(line);
    }
    return details;
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
