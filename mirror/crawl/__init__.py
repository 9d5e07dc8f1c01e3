"""The crawl (write) side: frontier, fetch, politeness, robots.txt, discovery, the crawler."""
