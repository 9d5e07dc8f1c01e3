"""The full-text search page: its form, read from the query string, and its results."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlencode

from mirror.manifest.reader import ManifestReader
from mirror.manifest.searchpages import COUNTED_AT_MOST, MAX_PAGES, PageHit, best_pages
from mirror.manifest.texts import SearchError
from mirror.replay.exportpages import shown_url
from mirror.replay.pages import (
    attr,
    marked_html,
    number,
    replay_path,
    run_timestamp,
    shown_time,
)

RESULTS_PER_PAGE = 20


@dataclass(frozen=True)
class SearchForm:
    """What /_search?q=...&run=N&all=1&page=P asks."""

    query: str = ""
    run: int | None = None  # that run's captures only
    all_runs: bool = False  # every text each page ever had
    page: int = 1

    @property
    def offset(self) -> int:
        return (self.page - 1) * RESULTS_PER_PAGE

    def href(self, page: int) -> str:
        params = {"q": self.query, **({"run": str(self.run)} if self.run is not None else {}),
                  **({"all": "1"} if self.all_runs else {}), "page": str(page)}
        return "/_search?" + urlencode(params)


def search_form(params: Mapping[str, str]) -> SearchForm:
    """The form from a query string; what does not read as a number is left out."""
    page = number(params.get("page", "")) or 1
    return SearchForm(params.get("q", "").strip()[:1000], number(params.get("run", "")),
                      params.get("all") == "1", min(page, MAX_PAGES))


@dataclass(frozen=True)
class SearchResults:
    """What the manifest answered."""

    runs: Sequence[int]  # for the form's choice of run
    hits: Sequence[PageHit] | None  # one page of them; None when nothing was asked
    more: bool  # there is a next page
    unindexed: int  # pages the text index lacks
    error: str | None = None  # the query cannot be read: why
    total: int = 0  # pages found, each once (every version: each text of a URL)
    at_least: bool = False  # more match than `total` counts (searchpages.COUNTED_AT_MOST)


def run_search(manifest: ManifestReader, form: SearchForm) -> SearchResults:
    """The form's page of results. Each page once, its query-string variants folded under
    its best-ranked one (as the app shows a site: manifest/searchpages.py), in the newest
    captures or in one run's. "Every version" folds nothing: it asks for each text a URL
    ever had, and a page's variants are versions of it too; one result per (URL, text)."""
    runs, unindexed = [r.id for r in manifest.runs.all()], manifest.texts.unindexed_pages()
    if not form.query:
        return SearchResults(runs, None, False, unindexed)
    try:
        if form.all_runs:
            hits = manifest.texts.search(form.query, all_runs=True, limit=RESULTS_PER_PAGE + 1,
                                   offset=form.offset)
            found = [PageHit(h) for h in hits]
            total = manifest.texts.matching_versions(form.query, limit=COUNTED_AT_MOST + 1)
            at_least = total > COUNTED_AT_MOST
            total = min(total, COUNTED_AT_MOST)
        else:
            pages = best_pages(manifest.texts, form.query, form.offset + RESULTS_PER_PAGE + 1,
                               form.run)
            found, total, at_least = pages.found[form.offset:], pages.total, pages.at_least
    except SearchError as exc:
        return SearchResults(runs, None, False, unindexed, str(exc))
    more = len(found) > RESULTS_PER_PAGE and form.page < MAX_PAGES
    return SearchResults(runs, found[:RESULTS_PER_PAGE], more, unindexed, total=total,
                         at_least=at_least)


def search_html(form: SearchForm, results: SearchResults) -> str:
    """The form, then the error, the total, the results and a pager."""
    hits, error, unindexed = results.hits, results.error, results.unindexed
    out = [f'<h1>Search the archive</h1>{_form(form, results.runs)}']
    if unindexed:
        out.append(f'<p class="note">{unindexed:,} page{"s" if unindexed != 1 else ""} '
                   "captured before the text index existed cannot be found: "
                   "<code>mirror index --search SITE.toml</code> reads them.</p>")
    if error is not None:
        out.append(f'<p class="error"><b>{html.escape(error)}</b></p>')
    elif hits is not None and not hits:
        out.append(f"<p>No page matches <b>{html.escape(form.query)}</b>"
                   f"{f' on page {form.page}' if form.page > 1 else ''}.</p>")
    elif hits:
        out.append(_total(form, results))
        items = "\n".join(_hit(h) for h in hits)
        out.append(f'<ol class="hits" start="{form.offset + 1}">{items}</ol>')
        out.append(_pager(form, results.more))
    return "\n".join(out)


def _total(form: SearchForm, results: SearchResults) -> str:
    """"17 pages · results 21-40, best first", as the app says it."""
    what = "version" if form.all_runs else "page"
    count = (f'{"at least " if results.at_least else ""}{results.total:,} {what}'
             f'{"s" if results.total != 1 else ""}')
    shown = len(results.hits or ())
    where = (f" · results {form.offset + 1}–{form.offset + shown}"
             if form.page > 1 or results.more else "")
    return f'<p class="total">{count}{where}, best first</p>'


def _form(form: SearchForm, runs: Sequence[int]) -> str:
    options = ['<option value="">newest capture of each page</option>'] + [
        f'<option value="{r}"{" selected" if r == form.run else ""}>run {r}</option>'
        for r in runs]
    checked = " checked" if form.all_runs else ""
    return ('<form method="get" action="/_search" role="search">'
            f'<input type="search" name="q" value="{attr(form.query)}" '
            'placeholder="words, &quot;a phrase&quot;, prefix*" aria-label="Search"> '
            f'<select name="run" aria-label="Which captures">{"".join(options)}</select> '
            f'<label><input type="checkbox" name="all" value="1"{checked}> every version'
            '</label> <button>Search</button> <a href="/">all pages</a></form>')


def _hit(found: PageHit) -> str:
    hit = found.hit
    ts = run_timestamp(hit.warc_date) or ""
    title = marked_html(hit.title, hit.title_marks) if hit.title else \
        html.escape(shown_url(hit.url))
    shared = f" · {hit.captures} captures have this text" if hit.captures > 1 else ""
    return (f'<li><a href="{attr(replay_path(ts, hit.url))}">{title}</a>'
            f'<div class="u">{html.escape(shown_url(hit.url))} · captured '
            f"{html.escape(shown_time(ts))} · run {hit.run_id}{shared}</div>"
            f"{_variants(found.variants, ts)}"
            f"<p>{marked_html(hit.snippet, hit.marks)}</p></li>")


def _variants(urls: Sequence[str], ts: str) -> str:
    """"+2 variants", opening to a link to each (the app's presentation)."""
    if not urls:
        return ""
    links = "".join(f'<div class="variant"><a href="{attr(replay_path(ts, u))}">'
                    f"{html.escape(shown_url(u))}</a></div>" for u in urls)
    return (f'<details class="variants"><summary>+{len(urls)} '
            f'variant{"s" if len(urls) != 1 else ""}</summary>{links}</details>')


def _pager(form: SearchForm, more: bool) -> str:
    links = []
    if form.page > 1:
        links.append(f'<a href="{attr(form.href(form.page - 1))}">previous</a>')
    if more:
        links.append(f'<a href="{attr(form.href(form.page + 1))}">next</a>')
    return f"<p>{' '.join(links)}</p>" if links else ""


#: added to the page's style
SEARCH_STYLE = (
    "mark{background:#ffe58a}.hits li{margin:.8em 0}.hits p{margin:.2em 0}"
    ".error{color:#a00}.note{color:#8a4b00}.total{color:#555}"
    ".variants summary{cursor:pointer;color:#555}.variant{margin-left:1em;overflow-wrap:anywhere}"
)
