"""Which wiki engine, forum or CMS serves a page: from its <meta name="generator"> or the
shapes of its URLs, and the built-in trap rules made for it (pure)."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

from mirror.crawl.traprules import BY_NAME, RULES


@dataclass(frozen=True)
class Software:
    name: str  # "MediaWiki": TrapRule.software of its own rules
    generator: re.Pattern[str]  # matches its <meta name="generator"> content
    shapes: re.Pattern[str]  # matches its page's HTML (URLs, markers) without a generator
    also: tuple[str, ...]  # generic rules that matter most for it


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_ACCOUNTS = ("login", "account", "returnto", "search")
_LISTS = ("sort", "view", "session")
SOFTWARE: tuple[Software, ...] = (
    Software("MediaWiki", _rx(r"^MediaWiki\b"),
             _rx(r"index\.php\?title=|/wiki/Special:|\bwgPageName\b|id=\"mw-content-text\""),
             (*_ACCOUNTS, "print")),
    Software("DokuWiki", _rx(r"^DokuWiki\b"), _rx(r"doku\.php|class=\"dokuwiki\b"),
             (*_ACCOUNTS, "print")),
    Software("phpBB", _rx(r"^phpBB\b"),
             _rx(r"viewtopic\.php|viewforum\.php|Powered by .{0,40}phpBB"),
             (*_ACCOUNTS, *_LISTS, "feeds")),
    Software("vBulletin", _rx(r"^vBulletin\b"), _rx(r"showthread\.php|forumdisplay\.php"),
             (*_ACCOUNTS, *_LISTS, "print")),
    Software("XenForo", _rx(r"^XenForo\b"), _rx(r"data-xf-init=|/threads/[^\"'/\s]+\.\d+/"),
             (*_ACCOUNTS, *_LISTS)),
    Software("Discourse", _rx(r"^Discourse\b"), _rx(r"/t/[^\"'/\s]+/\d+[\"'/]"),
             (*_ACCOUNTS, "sort")),
    Software("WordPress", _rx(r"^(?:WordPress|WooCommerce)\b"), _rx(r"/wp-content/|/wp-includes/"),
             ("replytocom", "share", *_ACCOUNTS, "feeds", "print", "shop-cart", "sort", "view")),
    Software("Drupal", _rx(r"^Drupal\b"),
             _rx(r"/sites/default/files/|data-drupal-|Drupal\.settings"),
             (*_ACCOUNTS, "print", "feeds")),
    Software("Joomla", _rx(r"^Joomla\b"), _rx(r"option=com_|/media/jui/|/media/system/js/"),
             (*_ACCOUNTS, "print", "feeds")),
    Software("a shop", _rx(r"^(?:Magento|PrestaShop|Shopify|OpenCart|Shopware)\b"),
             _rx(r"add-to-cart|/cart/add|data-product-id="),
             ("shop-cart", "sort", "view", "session", "search", "login", "account", "returnto")),
)


@dataclass(frozen=True)
class Detected:
    software: Software
    evidence: str  # 'generator "MediaWiki 1.39.4"' or 'URLs such as "viewtopic.php"'

    @property
    def rules(self) -> tuple[str, ...]:
        """Its own rules, then the generic ones that matter most for it, in table order."""
        own = {r.name for r in RULES if r.software == self.software.name}
        wanted = own | set(self.software.also)
        return tuple(r.name for r in RULES if r.name in wanted)


_META = re.compile(r"<meta\b[^>]*>", re.IGNORECASE)
_ATTR = re.compile(r"""\b(name|content)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.IGNORECASE)


def generator(html: str) -> str:
    """The content of the page's first <meta name="generator">, or ""."""
    for tag in _META.finditer(html[:200_000]):
        attrs = {m.group(1).lower(): next(g for g in m.groups()[1:] if g is not None)
                 for m in _ATTR.finditer(tag.group())}
        if attrs.get("name", "").lower() == "generator" and attrs.get("content"):
            return attrs["content"].strip()
    return ""


def detect(html: str) -> Detected | None:
    """The software of a page: by its generator first, then by the shapes of its URLs."""
    gen = generator(html)
    for software in SOFTWARE:
        if gen and software.generator.search(gen):
            return Detected(software, f'<meta name="generator" content="{gen[:80]}">')
    for software in SOFTWARE:
        if hit := software.shapes.search(html[:500_000]):
            return Detected(software, f'URLs and markers such as "{hit.group()[:60]}"')
    return None


def site_file_comment(found: Detected | None, problem: str = "") -> list[str]:
    """Commented lines for a new site file's [scope]: what was recognised, the rules made
    for it (on by default), and the `traps` setting that turns them off one by one."""
    if problem:
        return [f"# mirror could not look at the start page ({problem}), so it did not",
                "# recognise the site's software; the built-in trap rules are on all the same",
                "# (`mirror check` lists them)."]
    if found is None:
        return ["# mirror looked at the start page and did not recognise a wiki, forum or CMS;",
                "# the built-in trap rules are on all the same (`mirror check` lists them)."]
    width = max(len(name) for name in found.rules) + len("trap:")
    lines = [f"# The start page looks like {found.software.name}: {found.evidence}.",
             "# These built-in rules keep the crawl to its content; they are on by default",
             "# ([scope] traps). To crawl such URLs too, uncomment `traps` below and leave",
             "# the rule's name out:"]
    for name in found.rules:
        head = f"#   {'trap:' + name:<{width}}  "
        lines += textwrap.wrap(BY_NAME[name].what, 92, initial_indent=head,
                               subsequent_indent="#" + " " * (len(head) - 1))
    return lines + _commented_traps()


def _commented_traps() -> list[str]:
    lines, line = [], "# traps = ["
    for name in BY_NAME:
        item = f'"{name}", '
        if len(line) + len(item) > 92:
            lines.append(line.rstrip())
            line = "#          "
        line += item
    return [*lines, line.rstrip().rstrip(",") + "]"]
