"""Scrape gaps: a scraper that comes back later than the held peaks last may have missed a max.

A collector (``render`` reads it): it only updates its own state, under the renderer's lock, and
bumps ``generation`` when it counts a gap.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

log = logging.getLogger("nines.exporter")

#: Scrapers (by address) whose last scrape time is kept, to notice one that comes back later
#: than the hold; the oldest is forgotten beyond this (an HA pair needs two).
MAX_SCRAPERS = 64


class ScrapeGaps:
    """Per scraper, when it last scraped; scrapes later than ``gap_s`` after the previous one."""

    def __init__(self, gap_s: float) -> None:
        #: a scrape this long after the same scraper's previous one is a gap
        self.gap_s = gap_s
        #: scraper address → when it last scraped, oldest first
        self._scrapers: OrderedDict[str, float] = OrderedDict()
        self.gaps = 0
        self._logged: set[str] = set()
        self.generation = 0

    def scraped(self, scraper: str, now: float) -> None:
        """Note a scrape by ``scraper`` at ``now``; a gap is counted and logged once per scraper."""
        last = self._scrapers.pop(scraper, None)
        self._scrapers[scraper] = now
        if len(self._scrapers) > MAX_SCRAPERS:
            self._scrapers.popitem(last=False)
        if last is None or now - last <= self.gap_s:
            return
        self.gaps += 1
        self.generation += 1
        if scraper not in self._logged and len(self._logged) < MAX_SCRAPERS:
            self._logged.add(scraper)
            log.warning(
                "scraper %s came back after %.0f s, longer than peak_hold (%.0f s): "
                "window maxima in between may be unseen; scrape more often or raise "
                "the stream's peak_hold (nines_scrape_gaps_total counts these)",
                scraper,
                now - last,
                self.gap_s,
            )

    def __len__(self) -> int:
        return len(self._scrapers)
