// The Puppeteer peer of `crawlq bench --op crawl --render browser`: the same pages of the demo
// site's script-drawn section, crawled the way crawlq's browser spider does it. Listings are
// fetched plainly (fetch) and their item and next links followed; each item page is rendered in
// a fresh browser context (no cookies or cache shared, as crawlq's tabs), images, fonts and media
// blocked by request interception, waiting for div.product, TABS at once in one Chromium (the
// system's: CHROMIUM), the items read from the DOM. Prints
//   RESULT system=puppeteer op=crawl_browser pages=N items=M seconds=S pages_per_s=R
// and its CPU is measured from outside (scripts/bench-browser.sh runs it under /usr/bin/time:
// node's and, once closed and reaped, Chromium's).
import puppeteer from "puppeteer-core";

const base = process.env.URL;
const tabs = Number(process.env.TABS || 4);
const exe = process.env.CHROMIUM || "/usr/lib/chromium/chromium";

const browser = await puppeteer.launch({
  executablePath: exe,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-extensions", "--mute-audio", "--hide-scrollbars"],
});
const start = process.hrtime.bigint();
const seen = new Set();
const items = new Map();
let pages = 0;
const queue = [];

function links(html, cls) {
  const out = [];
  const re = cls === "item" ? /<a class="item" href="([^"]+)"/g : /<li class="next"><a href="([^"]+)"/g;
  for (const m of html.matchAll(re)) out.push(m[1]);
  return out;
}

async function listing(url) {
  const html = await (await fetch(url)).text();
  pages++;
  for (const l of links(html, "next")) enqueue(new URL(l, url).href, "listing");
  for (const l of links(html, "item")) enqueue(new URL(l, url).href, "item");
}

async function item(url) {
  const ctx = await browser.createBrowserContext();
  try {
    const page = await ctx.newPage();
    await page.setRequestInterception(true);
    page.on("request", (r) => (["image", "font", "media"].includes(r.resourceType()) ? r.abort("blockedbyclient") : r.continue()));
    await page.goto(url, { waitUntil: "load", timeout: 30000 });
    await page.waitForSelector("div.product", { timeout: 30000 });
    const found = await page.$$eval("div.product", (ds) => ds.map((d) => ({
      sku: d.querySelector("span.sku")?.textContent, title: d.querySelector("h1.title")?.textContent, price: d.querySelector("p.price")?.textContent,
    })));
    await page.content(); // the serialized DOM, as crawlq reads it
    for (const it of found) if (it.sku) items.set(it.sku, it);
    pages++;
  } finally {
    await ctx.close();
  }
}

function enqueue(url, kind) {
  if (seen.has(url)) return;
  seen.add(url);
  queue.push({ url, kind });
}

enqueue(new URL("/js/page-1.html", base).href, "listing");
// TABS item pages at once; listings in between, as they come.
await new Promise((resolve, reject) => {
  let running = 0;
  const pump = () => {
    if (queue.length === 0 && running === 0) return resolve();
    while (queue.length > 0 && running < tabs) {
      const job = queue.shift();
      running++;
      (job.kind === "listing" ? listing(job.url) : item(job.url)).then(() => { running--; pump(); }, reject);
    }
  };
  pump();
});
const seconds = Number(process.hrtime.bigint() - start) / 1e9;
await browser.close();
console.log(`RESULT system=puppeteer op=crawl_browser pages=${pages} items=${items.size} seconds=${seconds.toFixed(3)} pages_per_s=${(pages / seconds).toFixed(1)} tabs=${tabs}`);
