"""The built-in trap rules, one table per rule: URLs it must skip and content URLs it must keep;
and content URLs of each kind of software that no rule may skip."""

from __future__ import annotations

import pytest

from mirror.crawl.scope import cms_trap
from mirror.crawl.software import detect, generator, site_file_comment
from mirror.crawl.traprules import NAMES, RULES
from mirror.web.urls import normalize

BASE = "http://example.com"

#: rule -> (paths it skips, content paths it keeps)
TABLE: dict[str, tuple[list[str], list[str]]] = {
    "replytocom": (["/2024/05/hello/?replytocom=17"], ["/2024/05/hello/"]),
    "login": (["/wp-login.php", "/wiki/Special:UserLogin", "/ucp.php?mode=login"],
              ["/login-tips", "/images/login.png"]),
    "share": (["/p/?share=twitter"], ["/p/?shared=1"]),
    "print": (["/index.php?title=Main&printable=yes", "/p/?view=print"], ["/printing/12"]),
    "account": (["/index.php?title=Special:CreateAccount&returnto=Foo", "/register",
                 "/wiki/Special:CreateAccount", "/ucp.php?mode=register", "/user/register",
                 "/wp-signup.php", "/doku.php?id=start&do=register"],
                ["/registry/", "/signups-closed-notice", "/wiki/Register_(music)"]),
    "returnto": (["/index.php?title=Foo&returnto=Bar", "/node/5?destination=node/5",
                  "/x?redirect_to=%2F", "/x?return=aHR0cA"],
                 ["/returns-policy/", "/x?returning=1", "/destinations/"]),
    "mediawiki-edit": (["/index.php?title=Foo&action=edit", "/index.php?title=Foo&action=submit",
                        "/index.php?title=Talk:Foo&action=edit&redlink=1",
                        "/index.php?title=Foo&action=edit&section=2", "/wiki/Foo?veaction=edit",
                        "/index.php?title=Foo&action=watch", "/index.php?title=Foo&undo=5"],
                       ["/index.php?title=Foo", "/index.php?title=Foo&action=view",
                        "/index.php/Edit_war", "/wiki/Foo?actions=edit"]),
    "mediawiki-history": (["/index.php?title=Foo&action=history", "/index.php?title=Foo&oldid=12",
                           "/index.php?title=Foo&diff=prev&oldid=12", "/index.php?curid=4",
                           "/images/archive/20240101000000!Foo.png"],
                          ["/wiki/History_of_Foo", "/index.php?title=Category:Foo&pagefrom=B",
                           "/images/a/ab/Foo.png"]),
    "mediawiki-info": (["/index.php?title=Foo&action=info", "/index.php?title=Foo&action=raw",
                        "/api.php?action=rsd", "/wiki/Foo?useskin=monobook",
                        "/index.php?title=Foo&redirect=no"],
                       ["/wiki/Information", "/wiki/Foo?redirect=yes_please"]),
    "mediawiki-special": (["/wiki/Special:RecentChanges", "/index.php/Special:WhatLinksHere/Foo",
                           "/index.php?title=Special:Search&search=x",
                           "/index.php?title=Special%3ARandom",
                           "/wiki/Spezial:Letzte_%C3%84nderungen"],
                          ["/wiki/Special:AllPages", "/index.php?title=Special:AllPages&from=M",
                           "/wiki/Special:Categories", "/wiki/Special_relativity",
                           "/wiki/Specialty_coffee", "/wiki/Talk:Special_offers"]),
    "dokuwiki-edit": (["/doku.php?id=start&do=edit", "/doku.php?id=start&do=media&ns=",
                       "/doku.php?id=start&do=backlink", "/lib/exe/detail.php?id=start&media=a.png",
                       "/doku.php?id=start&do=recent"],
                      ["/doku.php?id=start", "/doku.php?id=start&do=index", "/doku.php/wiki:edit"]),
    "dokuwiki-history": (["/doku.php?id=start&do=revisions", "/doku.php?id=start&rev=1700000000",
                          "/doku.php?id=start&do=diff&rev2%5B0%5D=1&rev2%5B1%5D=2",
                          "/doku.php?id=start&at=1700000000"],
                         ["/doku.php?id=revisions", "/doku.php?id=start&review=1"]),
    "dokuwiki-export": (["/doku.php?id=start&do=export_raw", "/_export/xhtml/start"],
                        ["/doku.php?id=export", "/exports/"]),
    "phpbb-posting": (["/posting.php?mode=reply&f=2&t=5", "/posting.php?mode=quote&p=7",
                       "/report.php?p=7", "/mcp.php?i=main"],
                      ["/viewtopic.php?t=5", "/postings/", "/reports/2024.html"]),
    "phpbb-members": (["/memberlist.php?mode=viewprofile&u=2", "/ucp.php?i=pm",
                       "/viewonline.php", "/search.php?search_id=newposts"],
                      ["/viewforum.php?f=2", "/members-area/"]),
    "phpbb-views": (["/viewtopic.php?p=7", "/viewtopic.php?f=2&t=5&view=next",
                     "/viewtopic.php?t=5&hilit=word"],
                    ["/viewtopic.php?t=5", "/viewtopic.php?f=2&t=5&start=10",
                     "/viewtopic.php?t=5&p=7"]),
    "vbulletin-posting": (["/newreply.php?do=newreply&p=7", "/newthread.php?do=newthread&f=2",
                           "/private.php?do=newpm&u=3"], ["/showthread.php?t=5"]),
    "vbulletin-members": (["/member.php?u=3", "/online.php", "/calendar.php?c=1&month=1"],
                          ["/members/", "/forumdisplay.php?f=2"]),
    "vbulletin-views": (["/showpost.php?p=7&postcount=2", "/printthread.php?t=5",
                         "/showthread.php?t=5&goto=newpost", "/showthread.php?p=7",
                         "/showthread.php?t=5&mode=threaded"],
                        ["/showthread.php?t=5", "/showthread.php?t=5&page=2",
                         "/showthread.php?5-title"]),
    "xenforo-posting": (["/threads/hello.123/reply?quote=456", "/posts/456/quote",
                         "/index.php?threads/hello.123/add-reply"],
                        ["/threads/hello.123/", "/posts/2024/my-holiday", "/posts/456/"]),
    "xenforo-views": (["/threads/hello.123/post-456", "/threads/hello.123/latest",
                       "/goto/post?id=456", "/misc/style?style_id=2"],
                      ["/threads/hello.123/page-2", "/threads/postal-rates.5/"]),
    "xenforo-members": (["/members/bob.5/", "/whats-new/posts/", "/conversations/",
                         "/index.php?members/bob.5/"],
                        ["/members/", "/about/members/", "/forums/news.2/"]),
    "discourse-posts": (["/t/hello-world/123/4", "/t/hello-world/123/print", "/raw/123"],
                        ["/t/hello-world/123", "/t/hello-world/123?page=2", "/c/news/5"]),
    "discourse-users": (["/u/bob/activity", "/u?order=likes_received", "/badges/1/basic"],
                        ["/u/bob", "/users/", "/about/u/x"]),
    "wordpress-variants": (["/?p=5&preview=true", "/2024/05/hello/amp/", "/2024/05/hello/embed/",
                            "/wp-json/wp/v2/posts", "/?attachment_id=9", "/xmlrpc.php?rsd"],
                           ["/2024/05/hello/", "/amplifiers/", "/?p=5", "/embedded-systems/"]),
    "drupal-edit": (["/node/5/edit", "/node/5/revisions", "/node/5/revisions/7/view",
                     "/node/add/article", "/comment/reply/5", "/?q=node/5/edit",
                     "/user/3/edit"],
                    ["/node/5", "/?q=node/5", "/user/3", "/blog/editing-tips"]),
    "joomla-edit": (["/index.php?option=com_content&task=article.edit&a_id=5",
                     "/index.php?option=com_content&view=article&id=5&layout=edit",
                     "/index.php?option=com_content&view=article&id=5&tmpl=component",
                     "/component/users/?view=registration"],
                    ["/index.php?option=com_content&view=article&id=5",
                     "/index.php?option=com_content&view=category&id=2&layout=blog"]),
    "shop-cart": (["/shop/shirt/?add-to-cart=12", "/cart/add/12", "/checkout/"],
                  ["/shop/shirt/", "/cart/", "/checkout-faq/"]),
    "session": (["/viewtopic.php?t=5&sid=0123456789abcdef0123456789abcdef",
                 "/showthread.php?s=0123456789abcdef0123456789abcdef&t=5",
                 "/(S(lit3py55t21z5v55vlm25s55))/default.aspx",
                 "/sid=0123456789abcdef0123/page"],
                ["/viewtopic.php?t=5&sid=42", "/sidebar/", "/(note)/page"]),
    "search": (["/search?q=foo", "/search/foo/", "/?s=foo", "/search.php?keywords=x",
                "/index.php?searchword=x&option=com_search"],
               ["/search", "/search/", "/research/", "/searching-for-meaning/", "/x?s=2"]),
    "feeds": (["/feed/", "/2024/05/hello/feed/", "/?feed=rss2", "/taxonomy/term/3/feed",
               "/news.rss", "/rss.xml"],
              ["/feeding-cats/", "/feedback/", "/rss-explained/"]),
    "sort": (["/forums/news.2/?order=reply_count&direction=desc", "/shop/?orderby=price",
              "/list?sort=name", "/files/?C=N;O=D", "/viewforum.php?f=2&sk=t&sd=d"],
             ["/list?page=2", "/files/", "/orders-of-magnitude/", "/x?directions=left"]),
    "view": (["/shop/?view=grid", "/list?per_page=100", "/c/?product_list_limit=36",
              "/list?mode=list"],
             ["/shop/", "/view/grid-layouts/", "/list?page=3"]),
}


def test_every_rule_has_a_table() -> None:
    assert sorted(TABLE) == sorted(NAMES)
    assert all(rule.what and rule.name == rule.name.lower() for rule in RULES)


CASES = [(name, path, skipped) for name, (skips, keeps) in TABLE.items()
         for path, skipped in [(p, True) for p in skips] + [(p, False) for p in keeps]]


@pytest.mark.parametrize(("name", "path", "skipped"), CASES,
                         ids=[f"{n}:{'skip' if s else 'keep'}:{p}" for n, p, s in CASES])
def test_rule(name: str, path: str, skipped: bool) -> None:
    url = normalize(BASE + path)
    assert (cms_trap(url, (name,), keep_session=False) is not None) is skipped, url
    if skipped:
        assert cms_trap(url, (), keep_session=False) is None  # each can be turned off
        assert cms_trap(url, NAMES, keep_session=False) is not None


#: content pages of each kind of software: no built-in rule skips them
CONTENT = [
    "/index.php/Main_Page", "/wiki/Foo_(bar)", "/index.php?title=Foo", "/wiki/Talk:Foo",
    "/wiki/Category:Foo", "/wiki/File:Foo.png", "/wiki/User:Bob", "/wiki/Help:Editing",
    "/index.php?title=Category:Foo&pagefrom=B", "/wiki/Special:AllPages",
    "/index.php?title=Special:AllPages&from=M", "/wiki/Special_relativity",
    "/doku.php?id=start", "/doku.php?id=wiki:syntax", "/doku.php?id=start&do=index",
    "/viewforum.php?f=2", "/viewtopic.php?f=2&t=5&start=10", "/index.php",
    "/showthread.php?t=5&page=2", "/forumdisplay.php?f=2",
    "/threads/hello.123/page-2", "/forums/news.2/", "/t/hello-world/123?page=2",
    "/2024/05/hello/", "/category/news/page/2/", "/tag/x/", "/author/bob/",
    "/node/5", "/taxonomy/term/3", "/?q=node/5",
    "/index.php?option=com_content&view=article&id=5", "/shop/shirt/", "/products?page=2",
]


@pytest.mark.parametrize("path", CONTENT)
def test_content_is_kept_by_every_rule(path: str) -> None:
    assert cms_trap(normalize(BASE + path), NAMES, keep_session=False) is None


# -- recognising the software of a start page (mirror add) ----------------------------------

PAGES = [
    ('<meta name="generator" content="MediaWiki 1.39.4">', "MediaWiki", "generator"),
    ("<META CONTENT='DokuWiki' NAME=generator>", "DokuWiki", "generator"),
    ('<meta name="generator" content="WordPress 6.4.2">', "WordPress", "generator"),
    ('<meta name="generator" content="WooCommerce 8.0">', "WordPress", "generator"),
    ('<meta name="generator" content="Discourse 3.1.0 - https://github.com/discourse">',
     "Discourse", "generator"),
    ('<meta name="Generator" content="Drupal 10 (https://www.drupal.org)">', "Drupal",
     "generator"),
    ('<meta name="generator" content="Joomla! - Open Source Content Management">', "Joomla",
     "generator"),
    ('<meta name="generator" content="vBulletin 4.2.5">', "vBulletin", "generator"),
    ('<a href="./viewtopic.php?t=5">A topic</a>', "phpBB", "URLs"),
    ('<a href="/threads/hello.123/">Hello</a>', "XenForo", "URLs"),
    ('<a href="/index.php?title=Foo&amp;action=edit">edit</a>', "MediaWiki", "URLs"),
    ('<link rel="stylesheet" href="/wp-content/themes/x/style.css">', "WordPress", "URLs"),
    ('<img src="/sites/default/files/logo.png">', "Drupal", "URLs"),
]


@pytest.mark.parametrize(("html", "software", "evidence"), PAGES)
def test_detect(html: str, software: str, evidence: str) -> None:
    found = detect(f"<html><head><title>x</title>{html}</head><body></body></html>")
    assert found is not None and found.software.name == software
    assert evidence in found.evidence
    own = {r.name for r in RULES if r.software == software}
    assert own <= set(found.rules) <= set(NAMES)


def test_a_plain_page_is_not_recognised() -> None:
    assert detect('<html><meta name="generator" content="Hugo 0.120"><a href="/about/">'
                  "About</a></html>") is None
    assert generator('<meta name="description" content="MediaWiki 1.39">') == ""


def test_site_file_comment_lists_the_rules_and_the_setting() -> None:
    found = detect('<meta name="generator" content="DokuWiki">')
    lines = site_file_comment(found)
    assert lines[0] == ('# The start page looks like DokuWiki: <meta name="generator" '
                        'content="DokuWiki">.')
    listed = [line.split()[1] for line in lines if line.startswith("#   trap:")]
    assert listed == [f"trap:{name}" for name in found.rules] if found else False
    assert "trap:dokuwiki-export" in listed and "trap:mediawiki-edit" not in listed
    assert all(line.startswith("#") and len(line) <= 100 for line in lines)
    assert site_file_comment(None, "dns: no such host")[0] == (
        "# mirror could not look at the start page (dns: no such host), so it did not")
