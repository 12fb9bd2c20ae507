"""crawlq's hook into a Scrapy run (internal/command): Scrapy's final stats, written as JSON to
$CRAWLQ_STATS_FILE when the spider closes, for the runner to read into the run's stats."""
import json
import os

from scrapy.statscollectors import MemoryStatsCollector


class StatsCollector(MemoryStatsCollector):
    def _persist_stats(self, stats, spider):
        super()._persist_stats(stats, spider)
        path = os.environ.get("CRAWLQ_STATS_FILE")
        if not path:
            return
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(stats, f, default=str)
        os.replace(tmp, path)
