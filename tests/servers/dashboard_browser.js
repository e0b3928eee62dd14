// Drives `kiln serve`'s page in Debian's headless Chromium through puppeteer-core (installed by
// tools/setup.sh --tests into build/node/; it never downloads a browser), for
// tests/servers/dashboard_browser_test.cpp, which checks what this prints against the run store:
//   rows N             the table's rows once loaded
//   error TEXT         the error line the page shows for a malformed filter
//   filtered N NAME    the rows left by the filter `status = running`, and the first one's name
//   shown STEP MS      each new last step of run `live` in the loss chart, and when (epoch ms)
//   watch-start MS / watch-end MS, screenshot PATH
// and with `scale` (a store of 100 runs of 10,000 steps):
//   rendered-ms MS     from selecting every run to all five charts drawn with every point
//   load-frame-gap-ms MS  the longest gap between animation frames while loading and drawing
//   frame-gap-ms MS    the longest gap between animation frames in the 3 s after
// and with `ladder SWEEP` (an asha sweep's store), after clicking the sweep's name in the table:
//   rung STEP KEEP NAME,NAME,...   each column of the ladder: its step, how many go on (the
//                                  dashed line under that member), its members top to bottom
// Usage: node dashboard_browser.js live|scale|ladder URL SCREENSHOT.png [WATCH_SECONDS|SWEEP]
"use strict";
const puppeteer = require("puppeteer-core");

const [mode, url, screenshot, watchSeconds = "10"] = process.argv.slice(2);
const rowCount = () => document.querySelectorAll("#runs tbody tr").length;

async function filter(page, text) {
  await page.$eval("#filter", (box, value) => {
    box.value = value;
    box.form.requestSubmit();
  }, text);
}

// The highest x of run `live` in the loss chart that has a value: the last step it shows.
function lastShownStep() {
  const plot = window.kilnCharts && window.kilnCharts.loss;
  if (!plot) return -1;
  const index = plot.series.findIndex(s => s.label === "live");
  if (index < 0) return -1;
  const xs = plot.data[0], ys = plot.data[index];
  for (let i = xs.length - 1; i >= 0; i--) if (ys[i] !== null && ys[i] !== undefined) return xs[i];
  return -1;
}

async function live(page) {
  await page.goto(url, {waitUntil: "load"});
  await page.waitForFunction(n => document.querySelectorAll("#runs tbody tr").length >= n,
                             {timeout: 20000}, 2);
  console.log("rows " + await page.evaluate(rowCount));

  await filter(page, "status = running and");
  await page.waitForFunction(() => !document.getElementById("error").hidden, {timeout: 10000});
  console.log("error " + await page.$eval("#error", e => e.textContent));

  await filter(page, "status = running");
  await page.waitForFunction(
      () => document.getElementById("error").hidden &&
            document.querySelectorAll("#runs tbody tr").length === 1,
      {timeout: 10000});
  const name = await page.$eval("#runs tbody tr", tr => tr.dataset.name);
  console.log(`filtered ${await page.evaluate(rowCount)} ${name}`);

  await page.evaluate(
      () => document.querySelector('#runs tbody tr[data-name="live"] input').click());
  await page.waitForFunction(() => window.kilnCharts && window.kilnCharts.loss, {timeout: 10000});
  const start = Date.now();
  console.log("watch-start " + start);
  let last = -1;
  while (Date.now() - start < Number(watchSeconds) * 1000) {
    const step = await page.evaluate(lastShownStep);
    if (step !== last) console.log(`shown ${step} ${Date.now()}`);
    last = step;
    await new Promise(resolve => setTimeout(resolve, 20));
  }
  console.log("watch-end " + Date.now());
  await filter(page, "");
  await page.waitForFunction(n => document.querySelectorAll("#runs tbody tr").length >= n,
                             {timeout: 10000}, 2);
  await page.screenshot({path: screenshot, fullPage: true});
  console.log("screenshot " + screenshot);
}

async function scale(page) {
  await page.goto(url, {waitUntil: "load"});
  await page.waitForFunction(n => document.querySelectorAll("#runs tbody tr").length === n,
                             {timeout: 30000}, 100);
  const start = Date.now();
  await page.evaluate(() => {
    // The longest gap between animation frames while the runs load and the charts are drawn.
    window.loadGap = 0;
    let last = performance.now();
    const frame = now => {
      window.loadGap = Math.max(window.loadGap, now - last);
      last = now;
      if (!window.loadDone) requestAnimationFrame(frame);
    };
    requestAnimationFrame(frame);
    document.getElementById("select-all").click();
  });
  await page.waitForFunction(() => {
    const plots = Object.values(window.kilnCharts || {});
    return plots.length === 5 && plots.every(p => p.series.length === 101) &&
           window.kilnCharts.loss.data[0].length === 10000;
  }, {timeout: 120000, polling: 50});
  console.log("rendered-ms " + (Date.now() - start));
  await new Promise(resolve => setTimeout(resolve, 200));
  console.log("load-frame-gap-ms " + Math.round(await page.evaluate(() => {
    window.loadDone = true;
    return window.loadGap;
  })));
  const gap = await page.evaluate(() => new Promise(resolve => {
    let last = performance.now(), worst = 0;
    const end = last + 3000;
    const frame = now => {
      worst = Math.max(worst, now - last);
      last = now;
      if (now < end) requestAnimationFrame(frame); else resolve(worst);
    };
    requestAnimationFrame(frame);
  }));
  console.log("frame-gap-ms " + Math.round(gap));
  await page.screenshot({path: screenshot});
  console.log("screenshot " + screenshot);
}

async function ladder(page, sweep) {
  await page.goto(url, {waitUntil: "load"});
  await page.waitForFunction(() => document.querySelectorAll("#runs tbody tr").length > 0);
  await page.evaluate(name => {
    [...document.querySelectorAll("#runs tbody a")].find(a => a.textContent === name).click();
  }, sweep);
  await page.waitForSelector("#ladder-view .rung");
  const rungs = await page.$$eval("#ladder-view .rung", columns => columns.map(c => {
    const items = [...c.querySelectorAll("li")];
    const cut = items.findIndex(li => li.classList.contains("cut"));
    return `${c.querySelector("h3").textContent.replace("step ", "")} ${cut + 1} ` +
           items.map(li => li.querySelector("a").textContent).join(",");
  }));
  for (const r of rungs) console.log("rung " + r);
  await page.screenshot({path: screenshot, fullPage: true});
  console.log("screenshot " + screenshot);
}

async function main() {
  const browser = await puppeteer.launch({
    executablePath: process.env.KILN_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    // Chromium's sandbox cannot start as root (a CI container), nor as a user where the kernel
    // or AppArmor forbids unprivileged user namespaces; the test browser only ever
    // loads this test's own page on 127.0.0.1, which the sandbox would not protect anything from.
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({width: 1280, height: 1000});
    page.on("pageerror", e => console.log("pageerror " + e.message));
    await (mode === "scale" ? scale(page) : mode === "ladder" ? ladder(page, watchSeconds)
                                                                : live(page));
  } finally {
    await browser.close();
  }
}

main().catch(e => {
  console.log("failed " + e.message);
  process.exit(1);
});
