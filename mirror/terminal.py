"""Text for a terminal: what an archived page, a server or a file wrote is shown with its
control characters escaped, so nothing printed can move the cursor, retitle the window,
set the clipboard (OSC 52) or reorder what is shown. Every command's output that carries
such text (URLs, titles, reasons, file names) goes through here."""

from __future__ import annotations

from typing import TextIO

#: C0 and C1 controls (ESC starts a terminal command) and the bidirectional overrides
_UNSAFE = frozenset({*range(0x20), 0x7F, *range(0x80, 0xA0), *range(0x202A, 0x202F),
                     *range(0x2066, 0x206A)})
#: what printable_lines keeps: line breaks and tabs lay text out, they command nothing
_LAYOUT = frozenset({0x0A, 0x09})


def printable(text: object, keep: frozenset[int] = frozenset()) -> str:
    """str(text) with its control characters shown as escapes (ESC as \\x1b), safe to
    print; the code points in `keep` stay as they are."""
    text = str(text)
    if not any(ord(c) in _UNSAFE and ord(c) not in keep for c in text):
        return text
    return "".join((f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")
                   if ord(c) in _UNSAFE and ord(c) not in keep else c for c in text)


def printable_lines(text: object) -> str:
    """printable, keeping line breaks and tabs: for a whole message or table."""
    return printable(text, _LAYOUT)


def say(text: object, file: TextIO | None = None) -> None:
    """print for what may carry archived or remote text (URLs, titles, reasons): control
    characters escaped, line breaks kept."""
    print(printable_lines(text), file=file)
