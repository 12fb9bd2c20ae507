import os

import scrapy


class CatalogSpider(scrapy.Spider):
    """Every item of the demo catalogue: follows listing pages and item pages, one dict per item."""

    name = "catalog"

    def start_requests(self):
        # What Scrapyd gives a run: its job id as the _job argument, and its environment.
        self.logger.info(
            "job %s SCRAPY_JOB=%s SCRAPY_PROJECT=%s SCRAPY_SPIDER=%s",
            getattr(self, "_job", None), os.environ.get("SCRAPY_JOB"), os.environ.get("SCRAPY_PROJECT"), os.environ.get("SCRAPY_SPIDER"),
        )
        yield scrapy.Request(getattr(self, "base_url", "http://127.0.0.1:8088") + "/catalogue/page-1.html")

    def parse(self, response):
        for href in response.css("article.product_pod h3 a::attr(href)").getall():
            yield response.follow(href, self.parse_item)
        nxt = response.css("li.next a::attr(href)").get()
        if nxt:
            yield response.follow(nxt, self.parse)

    def parse_item(self, response):
        yield {
            "key": response.css("span.sku::text").get(),
            "title": response.css("h1.title::text").get(),
            "price": response.css("p.price::text").get(),
            "category": response.css("span.category::text").get(),
            "url": response.url,
            "tag": self.settings.get("CATALOG_TAG", ""),
            "label": getattr(self, "label", ""),
        }


class BrokenSpider(CatalogSpider):
    """The same crawl, but its item callback raises on every item whose number ends in 7."""

    name = "broken"

    def parse_item(self, response):
        if response.url.endswith("7.html"):
            raise ValueError("cannot parse " + response.url)
        yield from super().parse_item(response)


class ExitSpider(CatalogSpider):
    """Dies with exit status 1 after its first listing page, as a crashing interpreter would."""

    name = "exits"

    def parse(self, response):
        self.logger.error("giving up on %s", response.url)
        os._exit(1)
