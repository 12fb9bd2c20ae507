from scrapy.statscollectors import MemoryStatsCollector


class MarkingStatsCollector(MemoryStatsCollector):
    """A project's own stats collector (settings_marking.py): it adds a stat and logs at close, so
    a test sees that it ran beside crawlq's hook."""

    def close_spider(self, spider, reason):
        self.set_value("catalog/stats_class", "MarkingStatsCollector")
        spider.logger.info("MarkingStatsCollector closed the stats")
        super().close_spider(spider, reason)
