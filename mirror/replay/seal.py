"""The seal of archived pages: what every replayed or exported page gets besides its
policy (O2), because no policy directive that Chromium enforces covers it: WebRTC (UDP to
any host), speculation rules (prefetch and prerender of any site), frames of other
origins that the seal cannot reach."""

from __future__ import annotations

from pathlib import Path

#: the first script of every archived page (static/seal.js tells what it takes away)
SEAL_JS = (Path(__file__).parent / "static" / "seal.js").read_text(encoding="utf-8")
SEAL_SCRIPT = f"<script>{SEAL_JS}</script>"
#: frames and objects only from the archive itself: a data: or blob: frame would be a
#: window of its own origin, out of the seal's reach
FRAMES_SELF = "frame-src 'self'; object-src 'self'"
#: a page as archived (not rewritten, so not sealed) runs no script at all
NO_SCRIPT = "sandbox allow-same-origin"
#: mirror serve's second script (static/fetch.js): a page's own fetch(), XMLHttpRequest and
#: history addresses into this server's archive, on its own origin
FETCH_SCRIPT = ("<script>" + (Path(__file__).parent / "static" / "fetch.js").read_text(
    encoding="utf-8") + "</script>")
