# The project's settings with its own stats collector (scrapy.cfg's [settings] marking, SCRAPY_PROJECT=marking).
from catalog.settings import *  # noqa: F401,F403

STATS_CLASS = "catalog.stats.MarkingStatsCollector"
