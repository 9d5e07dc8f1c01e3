"""The built-in trap rules ([scope] traps): named URL shapes of wiki engines, forums, CMSs and
shops that multiply one page into many (edit forms, histories, diffs, sort orders, session
ids), each a pure predicate on a canonical URL's path and query (pure: no I/O)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

Test = Callable[[str, str], bool]  # (path starting with "/", query without "?") -> matches


@dataclass(frozen=True)
class TrapRule:
    name: str  # skip rule "trap:<name>"; the name in [scope] traps
    software: str  # whose URL shapes: "MediaWiki", "phpBB", "" for any site
    what: str  # what it skips, for people (mirror check, mirror explain)
    test: Test


class _Pattern:
    """A regular expression (case ignored) compiled on its first search: `mirror check`,
    `mirror status` and the app load the rules for their names and words, and compiling
    all of them would cost every start a few milliseconds."""

    __slots__ = ("_compiled", "_source")

    def __init__(self, source: str) -> None:
        self._source = source
        self._compiled: re.Pattern[str] | None = None

    def search(self, text: str) -> re.Match[str] | None:
        if self._compiled is None:
            self._compiled = re.compile(self._source, re.IGNORECASE)
        return self._compiled.search(text)


def _rx(pattern: str) -> _Pattern:
    return _Pattern(pattern)


# the end of a path segment, a page's file suffix allowed ("login.php", not "login.png")
SEG = r"(?:\.(?:php\d?|aspx?|jspx?|s?html?|cgi|pl|do|action|cfm))?(?:/|$)"
#: an action parameter's value: "mode=login", "do=login", "task=user.login"
ACT = r"(?:^|&)(?:action|task|do|mode|view)=(?:[\w-]+\.)?"
_WIKI = r"Special(?::|%3A)User"  # MediaWiki's Special:UserLogin, Special:UserLogout
LOGOUT = (_rx(rf"/(?:log-?out|log-?off|sign-?out){SEG}|{_WIKI}Logout"),
          _rx(rf"{ACT}log-?out(?:&|$)|(?:^|&)(?:logout|signout)(?:=|&|$)|{_WIKI}Logout"))


def _keys(*names: str) -> str:
    """A query pattern: any of these parameters, with or without a value."""
    return rf"(?:^|&)(?:{'|'.join(names)})(?:=|&|$)"


def _value(keys: str, values: str) -> str:
    """A query pattern: one of `keys` (alternatives) set to one of `values` (alternatives)."""
    return rf"(?:^|&)(?:{keys})=(?:{values})(?:&|$)"


def either(path: str = "(?!)", query: str = "(?!)") -> Test:
    """Matches when the path matches `path` or the query matches `query` (case ignored)."""
    p, q = _rx(path), _rx(query)
    return lambda u_path, u_query: bool(p.search(u_path) or (u_query and q.search(u_query)))


def _routed(route: str) -> Test:
    """For software that puts its route in the path or, without friendly URLs, first in the
    query ("/index.php?threads/a.1/reply") or in ?q= (Drupal 7)."""
    r = _rx(route)

    def test(path: str, qs: str) -> bool:
        if r.search(path):
            return True
        head = qs.partition("&")[0]
        head = head[2:] if head.lower().startswith("q=") else head
        return "=" not in head and bool(head) and bool(r.search("/" + head.replace("%2F", "/")))
    return test


def _phpbb_views(path: str, query: str) -> bool:
    """viewtopic.php?p=<post> without t= (one URL per post for the same topic page), the
    next/previous/unread views and search highlighting."""
    if not re.search(r"/viewtopic\.php$", path, re.IGNORECASE) or not query:
        return False
    if re.search(r"(?:^|&)(?:view=(?:next|previous|unread)|hilit=)", query, re.IGNORECASE):
        return True
    return bool(re.search(r"(?:^|&)p=\d", query)) and not re.search(r"(?:^|&)t=\d", query)


def _vbulletin_views(path: str, query: str) -> bool:
    """showpost.php, printthread.php, and showthread.php with a post (p=), a jump (goto=),
    a display mode or search highlighting."""
    if re.search(r"/(?:showpost|printthread)\.php$", path, re.IGNORECASE):
        return True
    return bool(query and re.search(r"/showthread\.php$", path, re.IGNORECASE) and re.search(
        r"(?:^|&)(?:p|goto|highlight|mode)=", query, re.IGNORECASE))


_SEARCH = r"/search(?:\.php|\.aspx|\.html?)?"
_SEARCH_TERM = _rx(_SEARCH + r"/[^/]")  # /search/term (WordPress, XenForo, Drupal 8+)
_SEARCH_FORM = _rx(_SEARCH + r"/?$")
_SEARCH_KEYS = _rx(_keys("search", "searchword", "searchphrase", "search_query"))


def _search(path: str, query: str) -> bool:
    """A search path with a query or a term after it (/search?q=x, /search/x; not the bare
    form), a search parameter, or WordPress's ?s= on a folder ("/", "/blog/")."""
    if _SEARCH_TERM.search(path):
        return True
    if not query:
        return False
    return bool(_SEARCH_FORM.search(path) or _SEARCH_KEYS.search(query)) or (
        path.endswith(("/", "/index.php")) and bool(re.search(r"(?:^|&)s=", query)))

_SPECIAL = r"(?:Special|Spezial|Sp%C3%A9cial|Especial|Speciale|Specjalna|Speciaal)(?::|%3A)"
_KEPT_SPECIAL = r"(?:AllPages|Categories)(?:[/&]|$)"  # lists that lead to every article
_MW_EDIT = ("edit|submit|delete|undelete|protect|unprotect|watch|unwatch|purge|rollback|revert"
            "|markpatrolled|formedit|editchangetags|mcrundo|mcrrestore|changecontentmodel")
_DW_EDIT = ("edit|draft|preview|save|cancel|locked|conflict|check|media|admin|profile|subscribe"
            "|search|recent|backlink|register|resendpwd")
_SORT_KEYS = ("sort|sortby|sort_by|sortorder|sort_order|sortdir|sort_dir|sortkey|orderby|order_by"
              "|order|sk|sd|product_list_order|product_list_dir")
_SESSION = r"(?:sid|sess|session|sessionid|jsessionid|phpsessid)"

#: every built-in rule, in the order they are tried; a URL is reported under the first.
#: Requisites (images, styles) meet only the login rule: a protected one redirects there.
RULES: tuple[TrapRule, ...] = (
    TrapRule("replytocom", "WordPress", "a comment-reply link (?replytocom=): one copy of the "
             "post per comment", either(query=r"(?:^|&)replytocom=")),
    TrapRule("login", "", "a login or password-reset page (or, with no session to keep, a "
             "logout link)",
             either(rf"/(?:wp-login\.php$|wp-admin{SEG}|(?:log-?in|sign-?in|log-?on){SEG}"
                    rf"|(?:lost|forgot(?:ten)?|reset)[-_]?password{SEG}"
                    rf"|password[-_]?(?:reset|forgot|lost){SEG}|password/reset{SEG}"
                    rf"|user/password{SEG})|{_WIKI}Log(?:in|out)",
                    rf"{ACT}(?:log-?in|lostpassword|resetpass|resendpwd|sendpassword|remind"
                    rf"|reset)(?:&|$)|(?:^|&)action=rp(?:&|$)|{_WIKI}Log(?:in|out)")),
    TrapRule("share", "WordPress", "a share-button link (?share=)", either(query=r"(?:^|&)share=")),
    TrapRule("print", "", "a print or e-mail variant of a page",
             either(r"^/(?:print|printpdf|printmail|print_pdf)/|/print/?$",
                    r"(?:^|&)(?:print|printable|printer|printview)(?:=|&|$)"
                    r"|(?:^|&)(?:format|output|view|type|layout|tmpl)=print(?:&|$)"
                    r"|(?:^|&)option=com_mailto(?:&|$)")),
    TrapRule("account", "", "an account page: sign-up, registration, profile (Special:"
             "CreateAccount, /register, ?mode=register)",
             either(rf"/(?:register|registration|sign-?up|create-?account|wp-signup\.php$"
                    rf"|wp-register\.php$){SEG}|{_SPECIAL}(?:CreateAccount|Preferences)",
                    rf"{ACT}(?:register|registration|signup|profile|editprofile)(?:&|$)"
                    rf"|{_SPECIAL}(?:CreateAccount|Preferences)")),
    TrapRule("returnto", "", "a link that carries the page it came from (?returnto=, "
             "?destination=, ?redirect_to=): one more URL per page",
             either(query=_keys("returnto", "returnurl", "return_url", "return_to", "return",
                                "redirect_to", "redirect_uri", "redirecturl", "destination",
                                "came_from", "camefrom", "backurl", "back_url"))),
    TrapRule("mediawiki-edit", "MediaWiki", "edit, delete, protect and watch forms "
             "(action=edit, veaction=, undo=)",
             either(query=_value("action", _MW_EDIT) + "|" + _keys("veaction", "undo",
                                                                   "undoafter", "redlink"))),
    TrapRule("mediawiki-history", "MediaWiki", "page histories, old revisions, diffs and "
             "permanent links (action=history, oldid=, diff=, curid=)",
             either(r"/images/(?:archive|deleted)/",
                    _value("action", "history") + "|" + _keys("oldid", "diff", "curid",
                                                              "direction", "unhide"))),
    TrapRule("mediawiki-info", "MediaWiki", "page info, credits, raw, render, skin and "
             "language variants, the API (action=info, useskin=, api.php)",
             either(r"/(?:api|rest)\.php(?:/|$)",
                    _value("action", "info|credits|raw|render") + "|" + _keys(
                        "useskin", "uselang", "useformat", "mobileaction", "variant")
                    + r"|(?:^|&)redirect=no(?:&|$)")),
    TrapRule("mediawiki-special", "MediaWiki", "Special: pages but Special:AllPages and "
             "Special:Categories (recent changes, what links here, search, upload, ...)",
             either(rf"/{_SPECIAL}(?!{_KEPT_SPECIAL})",
                    rf"(?:^|&)title={_SPECIAL}(?!{_KEPT_SPECIAL})")),
    TrapRule("dokuwiki-edit", "DokuWiki", "edit, media manager, admin, search, recent changes "
             "and backlink actions (do=edit, do=media, ...)",
             either(r"/lib/exe/(?:mediamanager|detail)\.php$",
                    _value("do", _DW_EDIT) + "|" + _keys("sectok", "tab_files", "tab_details"))),
    TrapRule("dokuwiki-history", "DokuWiki", "old revisions and diffs (do=revisions, do=diff, "
             "rev=, at=)",
             either(query=_value("do", "revisions|diff") + "|" + _keys(
                 "rev", r"rev2(?:%5B|\[)[^=&]*", "at", "difftype"))),
    TrapRule("dokuwiki-export", "DokuWiki", "export variants (do=export_raw, /_export/...)",
             either(r"/_export/", r"(?:^|&)do=export_")),
    TrapRule("phpbb-posting", "phpBB", "reply, quote, post, report and moderation forms "
             "(posting.php?mode=reply, report.php, mcp.php)",
             either(rf"/(?:posting|report|mcp){SEG}")),
    TrapRule("phpbb-members", "phpBB", "member list, profiles, user panel, who is online and "
             "search (memberlist.php, ucp.php, viewonline.php, search.php)",
             either(r"/(?:memberlist|ucp|viewonline|search)\.php$")),
    TrapRule("phpbb-views", "phpBB", "one URL per post of a topic (viewtopic.php?p=), "
             "next/previous/unread views, search highlighting (hilit=)", _phpbb_views),
    TrapRule("vbulletin-posting", "vBulletin", "reply, new-thread, edit, report and message "
             "forms (newreply.php, newthread.php, editpost.php, private.php)",
             either(r"/(?:newreply|newthread|editpost|report|sendmessage|private|subscription"
                    r"|threadrate|inlinemod|postings)\.php$")),
    TrapRule("vbulletin-members", "vBulletin", "members, profiles, who is online, user panel, "
             "calendar and search (member.php, online.php, calendar.php, ...)",
             either(r"/(?:member|memberlist|online|usercp|profile|showgroups|calendar|misc"
                    r"|search)\.php$")),
    TrapRule("vbulletin-views", "vBulletin", "single posts, print views and thread variants "
             "(showpost.php, printthread.php, showthread.php?p=, goto=, mode=, highlight=)",
             _vbulletin_views),
    TrapRule("xenforo-posting", "XenForo", "reply, quote, reaction, report and edit forms "
             "(/threads/x.1/reply, /posts/2/quote)",
             _routed(r"/threads/[^/]*\.?\d+/(?:reply|add-reply|draft|preview|watch|report"
                     r"|quote|poll|edit)|/posts/\d+/(?:quote|reply|react|reactions|report|edit|delete"
                     r"|share|bookmark|ip|history|warn|like|likes)(?:/|$)")),
    TrapRule("xenforo-views", "XenForo", "post permalinks and jumps ("
             "/threads/x.1/post-2, /latest, /unread, /goto/), style and language switches",
             _routed(r"/threads/[^/]*\.?\d+/(?:post-\d+|latest|unread)"
                     r"|/goto/|/misc/(?:style|language|contact|cookies)")),
    TrapRule("xenforo-members", "XenForo", "members, who is online, what's new, search, "
             "account and conversations",
             _routed(r"/members/(?:[^/]*\.\d+|list|online)(?:/|$)|/(?:whats-new|find-threads"
                     r"|find-new|conversations)(?:/|$)|/account/(?:alerts|preferences"
                     r"|account-details|bookmarks|reactions|security|privacy|signature"
                     r"|following|ignored)")),
    TrapRule("discourse-posts", "Discourse", "one URL per post of a topic (/t/slug/1/2), "
             "print and raw views (/t/slug/1/print, /raw/1)",
             either(r"^/t/[^/]+/\d+/(?:\d+|print)/?$|^/raw/\d+|^/posts/\d+/raw")),
    TrapRule("discourse-users", "Discourse", "user profile tabs, the user directory, badges "
             "(/u/name/activity, /u?order=)",
             either(r"^/u/[^/]+/.|^/u/?$|^/badges/\d+/")),
    TrapRule("wordpress-variants", "WordPress", "previews, attachment, AMP and embed variants, "
             "the REST API and XML-RPC (?preview=, /amp/, /embed/, /wp-json/)",
             either(r"/(?:amp|embed)/?$|^/wp-json/|/xmlrpc\.php$",
                    _keys("preview", "attachment_id", "amp", "like_comment", "unapproved",
                          "moderation-hash", "doing_wp_cron", "rest_route", "wc-ajax",
                          "customize_changeset_uuid"))),
    TrapRule("drupal-edit", "Drupal", "edit, delete, revision and translation pages, new-content "
             "and comment-reply forms (/node/1/edit, /node/1/revisions, /comment/reply/1)",
             _routed(r"/(?:node|user|comment|taxonomy/term|media|block|group)/\d+/(?:edit"
                     r"|delete|revisions|translations|devel|clone|track|moderation|layout"
                     r"|latest|contact|outline)(?:/|$)|/node/add(?:/|$)|/comment/reply/"
                     r"|/filter/tips(?:/|$)")),
    TrapRule("joomla-edit", "Joomla", "tasks, edit layouts, bare component views and the user "
             "component (task=, layout=edit, tmpl=component, option=com_users)",
             either(r"/component/(?:users|mailto|search)(?:/|$)",
                    _keys("task", "a_id") + "|" + _value("layout", "edit") + "|"
                    + _value("tmpl", "component") + "|" + _value("option", "com_users"))),
    TrapRule("shop-cart", "", "add-to-cart, wish-list and compare links (?add-to-cart=, "
             "/cart/add)",
             either(r"/(?:cart|basket|wishlist|compare)/(?:add|remove)|/checkout(?:/|$)",
                    _keys("add-to-cart", "add_to_cart", "add_to_wishlist", "remove_item",
                          "add_to_compare", "removed_item"))),
    TrapRule("session", "", "session ids left in URLs (phpBB sid=, vBulletin s=, ASP.NET "
             "/(S(...))/, /sid=.../ path segments)",
             either(rf"/\((?:[A-Z]\([^)/]*\))+\)/|/{_SESSION}[=_-][0-9a-z]{{16,}}(?:/|$)",
                    r"(?:^|&)(?:sid|s)=[0-9a-f]{32}(?:&|$)")),
    TrapRule("search", "", "site search results (/search?q=, ?s=, ?search=, search.php)",
             _search),
    TrapRule("feeds", "", "RSS and Atom feeds of every post and category (/feed/, ?feed=, "
             ".rss)",
             either(r"/feed(?:/(?:rss2?|atom|rdf))?/?$|\.(?:rss|atom)$|/rss\.xml$|/feed\.php$"
                    r"|/app\.php/feed(?:/|$)",
                    _keys("feed") + "|" + _value("format|type", "feed|rss|rss2|atom"))),
    TrapRule("sort", "", "sort orders of the same list (sort=, order=, orderby=, dir=asc, "
             "Apache ?C=N;O=D)",
             either(query=_keys(_SORT_KEYS) + r"|(?:^|&)(?:dir|direction)=(?:asc|desc)(?:&|$)"
                    r"|(?:^|[&;])C=[NMSD](?:[;&]|$)|(?:^|[&;])O=[AD](?:[;&]|$)")),
    TrapRule("view", "", "display modes and page sizes of the same list (view=grid, "
             "mode=list, per_page=)",
             either(query=_value("view|mode|display|layout|product_list_mode",
                                 "list|grid|table|tiles|gallery|compact|detailed|expanded"
                                 "|collapsed") + "|" + _keys(
                 "per_page", "perpage", "page_size", "pagesize", "items_per_page",
                 "itemsperpage", "product_list_limit"))),
)

BY_NAME = {rule.name: rule for rule in RULES}
NAMES = tuple(BY_NAME)
#: rules also tried on page requisites: a login URL is never an image or a stylesheet
REQUISITE_RULES = frozenset({"login"})


def first_trap(path: str, query: str, traps: frozenset[str] | tuple[str, ...],
               requisite: bool = False) -> str | None:
    """The name of the first rule in `traps` that matches, or None."""
    for rule in RULES:
        if rule.name in traps and (not requisite or rule.name in REQUISITE_RULES) \
                and rule.test(path, query):
            return rule.name
    return None


def is_logout(path: str, query: str) -> bool:
    """Is this a logout link (which would end a crawl's session)?"""
    return bool(LOGOUT[0].search(path) or (query and LOGOUT[1].search(query)))


def rule_lines(traps: frozenset[str] | tuple[str, ...]) -> list[str]:
    """One line per built-in rule, on or off under `traps`, for `mirror check`."""
    width = max(len(name) for name in NAMES) + len("trap:")
    lines = ["trap rules ([scope] traps; remove a name to crawl those URLs again):"]
    for rule in RULES:
        state = "on " if rule.name in traps else "off"
        whose = f"{rule.software}: " if rule.software else ""
        lines.append(f"  {state}  {'trap:' + rule.name:<{width}}  {whose}{rule.what}")
    return lines
