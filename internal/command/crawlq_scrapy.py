"""crawlq's hook into a Scrapy run (internal/command): Scrapy's final stats, written as JSON to
$CRAWLQ_STATS_FILE when the spider closes, for the runner to read into the run's stats.

crawlq runs Scrapy with STATS_CLASS=crawlq_scrapy.StatsCollector, which is not a class but a
factory: it builds a subclass of the stats collector the run would have used without crawlq (the
run's own STATS_CLASS, passed as $CRAWLQ_STATS_CLASS, else the project's settings, else Scrapy's
default), so a project's own collector keeps working and crawlq still reads the final stats.

The factory also makes the run's feeds flush after each item: crawlq reads items from a pipe
(-o /dev/fd/3:jsonlines), and Scrapy's file storage buffers its writes, so without it a run's
items reached crawlq (and its live item count) only in 8 KB chunks or when the spider closed."""
import json
import os

from scrapy import signals
from scrapy.extensions.feedexport import FeedExporter
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.misc import load_object
from scrapy.utils.project import get_project_settings


class _WriteFinalStats:
    """Writes the final stats once the collector it is mixed into has closed the spider."""

    def close_spider(self, spider, reason):
        try:
            super().close_spider(spider, reason)
        finally:
            _write(self.get_stats())


def _write(stats):
    path = os.environ.get("CRAWLQ_STATS_FILE")
    if not path:
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(stats, f, default=str)
    os.replace(tmp, path)


def _base_class():
    path = os.environ.get("CRAWLQ_STATS_CLASS") or get_project_settings().get("STATS_CLASS")
    base = load_object(path) if path else MemoryStatsCollector
    if base is StatsCollector:  # the project names crawlq's own hook
        return MemoryStatsCollector
    if not isinstance(base, type):
        raise TypeError(f"STATS_CLASS {path!r} is not a class; crawlq needs one to chain its stats hook to")
    return base


_classes = {}


def _flush_feeds_after_each_item(crawler):
    """Once the spider is open (the feed exporter has opened its files, and its item handler is
    connected before this one), flushes every feed file after each scraped item."""
    exporters = [e for e in getattr(crawler.extensions, "middlewares", ()) if isinstance(e, FeedExporter)]

    def flush(**_):
        for exporter in exporters:
            for slot in getattr(exporter, "slots", ()):
                f = getattr(slot, "file", None)
                if f is not None and hasattr(f, "flush"):
                    f.flush()

    crawler.signals.connect(flush, signal=signals.item_scraped, weak=False)


def StatsCollector(crawler):  # noqa: N802 (named as the class it stands for)
    crawler.signals.connect(lambda **_: _flush_feeds_after_each_item(crawler), signal=signals.spider_opened, weak=False)
    base = _base_class()
    cls = _classes.get(base)
    if cls is None:
        cls = _classes[base] = type(base.__name__, (_WriteFinalStats, base), {"__module__": base.__module__})
    return cls(crawler)
