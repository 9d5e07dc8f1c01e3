"""A rendered DOM made inert (pure): the page as a browser showed it after its scripts ran,
kept so that it opens with its content where no script runs again (an export opened from
file://, a ZIM in a Kiwix reader). Its scripts already did their work: running them again
would fetch what is not there, or build the page a second time over what they built.

- every <script> goes (a data block such as application/ld+json stays: it never runs),
  and so do <link rel=modulepreload> and <link rel=preload as=script>;
- every on* event attribute goes, and javascript: in an address becomes nothing;
- <noscript> goes: its content is what a browser without scripts shows instead of what the
  scripts built, which the rendered DOM already holds;
- a lazy image still waiting for its turn (data-src and no real src, or a data: or blank
  placeholder) gets its data-src as src, data-srcset as srcset, and loading=lazy is dropped,
  so that it shows from file:// (one the browser scrolled to has its real src already)."""

from __future__ import annotations

from typing import Any

__all__ = ["make_inert"]

#: script types that are data, never run (HTML's "data block")
_DATA_SCRIPTS = frozenset({"application/ld+json", "application/json"})
#: attributes a lazy-loading library keeps the real address in, by the attribute it sets
_LAZY = (("src", ("data-src", "data-lazy-src", "data-original", "data-lazy")),
         ("srcset", ("data-srcset", "data-lazy-srcset")))
_URL_ATTRS = frozenset({"href", "src", "action", "formaction", "xlink:href", "data", "poster"})
#: a placeholder a lazy image shows until its turn: a tiny inline image, or nothing
_PLACEHOLDER = ("data:", "about:blank")


def make_inert(root: Any) -> None:
    """Change the lxml tree of a rendered DOM in place as the module's doc says."""
    for el in list(root.iter()):
        if not isinstance(el.tag, str):  # a comment or processing instruction
            continue
        tag = el.tag.lower()
        if _drop(el, tag):
            _remove(el)
            continue
        _strip_handlers(el)
        if tag in ("img", "source", "iframe", "video"):
            _show_lazy(el)


def _drop(el: Any, tag: str) -> bool:
    if tag == "noscript":
        return True
    if tag == "script":
        kind = (el.get("type") or "").split(";")[0].strip().lower()
        return kind not in _DATA_SCRIPTS
    if tag == "link":
        rel = (el.get("rel") or "").lower().split()
        return "modulepreload" in rel or ("preload" in rel
                                          and (el.get("as") or "").lower() == "script")
    return False


def _remove(el: Any) -> None:
    """Remove an element but keep the text after it (lxml keeps it in the element's tail)."""
    parent = el.getparent()
    if parent is None:
        return
    tail = el.tail
    prev = el.getprevious()
    parent.remove(el)
    if tail:
        if prev is not None:
            prev.tail = (prev.tail or "") + tail
        else:
            parent.text = (parent.text or "") + tail


def _strip_handlers(el: Any) -> None:
    for name in list(el.attrib):
        lower = name.lower()
        if lower.startswith("on"):
            del el.attrib[name]
        elif lower in _URL_ATTRS and el.get(name, "").strip().lower().startswith("javascript:"):
            del el.attrib[name]


def _show_lazy(el: Any) -> None:
    for real, holders in _LAZY:
        current = (el.get(real) or "").strip()
        if current and not current.lower().startswith(_PLACEHOLDER):
            continue  # the browser loaded the real one
        for holder in holders:
            if (el.get(holder) or "").strip():
                el.set(real, el.get(holder).strip())
                break
    if (el.get("loading") or "").lower() == "lazy":
        del el.attrib["loading"]
