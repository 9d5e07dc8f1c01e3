"""Generated trap sites for tests/test_trapsites.py (issue 33): each a few known content pages
and a URL space that grows without end (or many times over) around them, as real software
makes it: an endless calendar, faceted filters in any order, sort/order/view parameters with
pagination, session ids in the path, print views. Served by aiohttp on 127.0.0.1.

`answer(path, query)` of each site gives the HTML of a URL (None: 404); `content` holds a
regular expression per content page, matched against the stored URLs.

PYTEST_DONT_REWRITE: a helper module of the tests, not a test.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlencode

from aiohttp import web

Answer = Callable[[str, list[tuple[str, str]]], "str | None"]


def html(title: str, links: list[str], text: str = "") -> str:
    anchors = "\n".join(f'<li><a href="{link}">{link}</a></li>' for link in links)
    return (f"<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1>"
            f"<p>{text}</p><ul>{anchors}</ul></body></html>")


def content_page(kind: str, k: int, links: list[str]) -> str:
    return html(f"{kind} {k}", links, f"The text of {kind} {k}, the reason for the archive: "
                f"content-{kind}-{k}. " + "Words a reader wants. " * 20)


@dataclass
class TrapSite:
    name: str
    answer: Answer
    content: list[str]  # one regular expression per content page, over stored URLs
    log: list[str] = field(default_factory=list)
    base: str = ""

    async def _dispatch(self, request: web.Request) -> web.Response:
        self.log.append(request.path_qs)
        body = self.answer(request.path, list(request.query.items()))
        if body is None:
            return web.Response(status=404, text="not found", content_type="text/html")
        return web.Response(text=body, content_type="text/html")

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self._dispatch)
        return app

    def missing(self, stored: set[str]) -> list[str]:
        """The content patterns no stored URL matches."""
        return [p for p in self.content if not any(re.search(p, u) for u in stored)]


# -- an endless calendar: prev/next months forever, five events --------------------------------

EVENTS = 5


def calendar(path: str, query: list[tuple[str, str]]) -> str | None:
    events = [f"/event/{k}" for k in range(1, EVENTS + 1)]
    if path == "/":
        return html("Club", [*events, "/calendar/2026/01"])
    if m := re.fullmatch(r"/event/(\d+)", path):
        return content_page("event", int(m[1]), ["/", "/calendar/2026/01"])
    if m := re.fullmatch(r"/calendar/(\d+)/(\d\d)", path):
        month = int(m[1]) * 12 + int(m[2]) - 1
        prev, nxt = divmod(month - 1, 12), divmod(month + 1, 12)
        links = [f"/calendar/{prev[0]}/{prev[1] + 1:02d}", f"/calendar/{nxt[0]}/{nxt[1] + 1:02d}"]
        on = [e for k, e in enumerate(events, 1) if (int(m[1]), int(m[2])) == (2026, k)]
        return html(f"{m[1]}-{m[2]}", ["/", *links, *on], "Events this month." if on else
                    "No events this month.")
    return None


# -- faceted filters, combined in any order -----------------------------------------------------

FACETS = {"color": ["red", "blue", "green", "black", "white"], "size": ["s", "m", "l", "xl"],
          "brand": ["acme", "globex", "initech", "umbrella"], "material": ["wool", "cotton",
          "linen"], "price": ["0-10", "10-50", "50-100"]}
PRODUCTS = 6


def facets(path: str, query: list[tuple[str, str]]) -> str | None:
    products = [f"/product/{k}" for k in range(1, PRODUCTS + 1)]
    if path == "/":
        return html("Shop", ["/shop", *products])
    if m := re.fullmatch(r"/product/(\d+)", path):
        return content_page("product", int(m[1]), ["/", "/shop"])
    if path == "/shop":
        chosen = {k for k, _ in query}
        more = [f"/shop?{urlencode([*query, (key, value)])}"
                for key, values in FACETS.items() if key not in chosen for value in values]
        return html("Shop", ["/", *products, *more], f"{len(query)} filters.")
    return None


# -- sort, order and view parameters, pages without end ------------------------------------------

SORTS, ORDERS, VIEWS = ["name", "price", "date", "rating"], ["asc", "desc"], ["grid", "list"]
ITEMS = 6


def sorting(path: str, query: list[tuple[str, str]]) -> str | None:
    items = [f"/item/{k}" for k in range(1, ITEMS + 1)]
    if path == "/":
        return html("Catalogue", ["/list", *items])
    if m := re.fullmatch(r"/item/(\d+)", path):
        return content_page("item", int(m[1]), ["/", "/list"])
    if path == "/list":
        args = dict(query)
        page = int(args.get("page", "1")) if args.get("page", "1").isdigit() else 1
        shown = items[(page - 1) * 3:page * 3]
        variants = [f"/list?{urlencode({'sort': s, 'order': o, 'view': v, 'page': page})}"
                    for s, o, v in itertools.product(SORTS, ORDERS, VIEWS)]
        nxt = f"/list?{urlencode({**args, 'page': page + 1})}"  # "next" even past the end
        return html(f"Catalogue page {page}", ["/", *shown, *variants, nxt],
                    "" if shown else "No more items.")
    return None


# -- session ids in the path: a new one in every answer ------------------------------------------

ARTICLES = 5


def sessions() -> Answer:
    counter = itertools.count(1)

    def answer(path: str, query: list[tuple[str, str]]) -> str | None:
        sid = f"{next(counter) * 2654435761 % 2**32:08x}"
        links = [f"/s/{sid}/article/{k}" for k in range(1, ARTICLES + 1)] + [f"/s/{sid}/"]
        if path == "/" or re.fullmatch(r"/s/[0-9a-f]{8}/", path):
            return html("News", links)
        if m := re.fullmatch(r"/s/[0-9a-f]{8}/article/(\d+)", path):
            return content_page("article", int(m[1]), links)
        return None

    return answer


# -- print views of every page, in the shapes CMSs give them --------------------------------------

PAGES = 20
PRINTS = ["{p}?view=print", "{p}/printable", "{p}?output=print", "{p}?print=1"]


def prints(path: str, query: list[tuple[str, str]]) -> str | None:
    pages = [f"/page/{k}" for k in range(1, PAGES + 1)]
    if path == "/":
        return html("Handbook", pages)
    m = re.fullmatch(r"/page/(\d+)(/printable)?", path)
    if m is None or not 1 <= int(m[1]) <= PAGES:
        return None
    k = int(m[1])
    neighbours = [pages[(k - 2) % PAGES], pages[k % PAGES]]
    views = [v.format(p=f"/page/{k}") for v in PRINTS]
    if m[2] or query:  # a print view: the same text, links to the other pages' print views
        return content_page("page", k, [v.format(p=p) for p in neighbours for v in PRINTS])
    return content_page("page", k, ["/", *neighbours, *views])


def all_sites() -> dict[str, Callable[[], TrapSite]]:
    """A new site of each kind (the session site has state: one per run)."""
    return {
        "calendar": lambda: TrapSite("calendar", calendar,
                                     [rf"/event/{k}$" for k in range(1, EVENTS + 1)]),
        "facets": lambda: TrapSite("facets", facets,
                                   [rf"/product/{k}$" for k in range(1, PRODUCTS + 1)]),
        "sort-view": lambda: TrapSite("sort-view", sorting,
                                      [rf"/item/{k}$" for k in range(1, ITEMS + 1)]),
        "session-path": lambda: TrapSite("session-path", sessions(),
                                         [rf"/s/[0-9a-f]{{8}}/article/{k}$"
                                          for k in range(1, ARTICLES + 1)]),
        "print-views": lambda: TrapSite("print-views", prints,
                                        [rf"/page/{k}$" for k in range(1, PAGES + 1)]),
    }
