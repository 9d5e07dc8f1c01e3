"""Serving to a phone on the local network (`--lan`): this machine's address there, the
address to open with its token, and that address as a QR code for a terminal."""

from __future__ import annotations

import io
import ipaddress
import socket
from collections.abc import Iterable

import segno

from mirror.errors import UsageError

NO_ADDRESS = "no local network address found; use --host ADDRESS"
#: where the probe socket "connects" so that the system picks the interface and source
#: address it would send a local network's traffic from; a UDP connect sends nothing
PROBE = ("10.254.254.254", 9)


class LanError(UsageError):
    """This machine has no address on a local network."""


def is_lan(address: str) -> bool:
    """Whether `address` is an IPv4 address another machine of a home or office network can
    reach: a private or link-local one, not loopback, the wildcard or multicast."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return (ip.version == 4 and (ip.is_private or ip.is_link_local)
            and not (ip.is_loopback or ip.is_unspecified or ip.is_multicast))


def choose(candidates: Iterable[str]) -> str | None:
    """The first of `candidates` that is a local network address."""
    return next((c for c in candidates if is_lan(c)), None)


def lan_address() -> str:
    """This machine's address on the local network: the source address of its route
    towards a private network, else one its host name resolves to; LanError if none."""
    found = choose([*_routed(), *_named()])
    if found is None:
        raise LanError(NO_ADDRESS)
    return found


def lan_host(host: str | None) -> str:
    """The address `--lan` binds: `host` (--host) when given, one address and not all
    (the printed address must be one a phone can open), else this machine's LAN address."""
    if host is None:
        return lan_address()
    try:
        every = ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        every = False
    if every:
        raise LanError(f"--lan --host {host}: give one address a phone can reach "
                       "(e.g. 192.168.1.20), not all of them")
    return host


def _routed() -> list[str]:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(PROBE)
            return [str(probe.getsockname()[0])]
    except OSError:  # no route at all: no network
        return []


def _named() -> list[str]:
    try:
        found = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
    except OSError:
        return []
    return [str(info[4][0]) for info in found]


def token_url(base: str, token: str) -> str:
    """The address to open: `base` (ending in '/') with the access token."""
    return f"{base}?token={token}"


def qr_text(url: str) -> str:
    """`url` as a QR code drawn with half blocks (two modules a character: it fits a
    terminal), light modules in the terminal's text colour, with its quiet zone."""
    out = io.StringIO()
    segno.make_qr(url).terminal(out=out, compact=True)
    return out.getvalue()


def can_draw(encoding: str | None) -> bool:
    """Whether text in `encoding` (a terminal's) can carry the QR code's block characters."""
    try:
        "\u2580\u2584\u2588".encode(encoding or "ascii")
    except (LookupError, UnicodeEncodeError):
        return False
    return True


def notice(base: str, token: str, what: str, encoding: str | None = "utf-8") -> str:
    """What `--lan` prints once listening: where, who can read `what`, the address to open
    and its QR code (unless a terminal in `encoding` cannot show it)."""
    url = token_url(base, token)
    code = (f"  or scan it with a phone:\n{qr_text(url)}" if can_draw(encoding)
            else "  (no QR code: this terminal's encoding cannot draw one)\n")
    return (f"  read-only on the local network at {base}\n"
            f"  whoever on your network opens this address can read {what}; Ctrl-C stops\n"
            f"  open {url}\n{code}")
