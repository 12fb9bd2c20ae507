# Automatically created by: scrapyd-deploy (the file scrapyd-client writes)
from setuptools import setup, find_packages

setup(
    name="project",
    version="1.0",
    packages=find_packages(),
    entry_points={"scrapy": ["settings = catalog.settings"]},
)
