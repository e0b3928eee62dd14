"""Drives `kiln serve`'s page in Debian's headless Chromium through Selenium and Debian's
chromium-driver (both from tools/setup.sh --tests: the packages chromium and chromium-driver, and
selenium in .venv/; nothing is ever downloaded), for tests/servers/dashboard_browser_test.cpp,
which checks what this prints against the run store:
  rows N             the table's rows once loaded
  error TEXT         the error line the page shows for a malformed filter
  filtered N NAME    the rows left by the filter `status = running`, and the first one's name
  shown STEP MS      each new last step of run `live` in the loss chart, and when (epoch ms)
  watch-start MS / watch-end MS, screenshot PATH
and with `scale` (a store of 100 runs of 10,000 steps):
  rendered-ms MS     from selecting every run to all five charts drawn with every point
  load-frame-gap-ms MS  the longest gap between animation frames while loading and drawing
  frame-gap-ms MS    the longest gap between animation frames in the 3 s after
and with `ladder SWEEP` (an asha sweep's store), after clicking the sweep's name in the table:
  rung STEP KEEP NAME,NAME,...   each column of the ladder: its step, how many go on (the
                                 dashed line under that member), its members top to bottom
and with `layers RUN` (a run of a mixture of experts), after ticking the run in the table:
  layer NAME STEP:VALUE,...      each chart of a layer measure: the points it draws of the run
  compare-metric NAME            each layer measure the compare view offers to group by
and in every mode, last: `pageerror MESSAGE` for each uncaught error or unhandled rejection of
the page, and `failed MESSAGE` (exit status 1) where a step did not happen in time.
Usage: .venv/bin/python3 dashboard_browser.py live|scale|ladder|layers URL SCREENSHOT.png
       [WATCH_SECONDS|SWEEP|RUN]
"""
import base64
import os
import sys
import time

# Selenium Manager would otherwise fetch a driver or a browser it finds missing: the test must use
# Debian's, and fail where they are absent. The Service below names the driver, which skips
# Selenium Manager; this keeps it offline should a later Selenium consult it anyway.
os.environ["SE_OFFLINE"] = "true"

from selenium import webdriver  # noqa: E402  (after SE_OFFLINE)
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMEDRIVER = "/usr/bin/chromedriver"
WIDTH, HEIGHT = 1280, 1000

ROW_COUNT = 'return document.querySelectorAll("#runs tbody tr").length;'

# Installed before the page's own scripts: the page's uncaught errors, which the test must not see.
# A listener on window (not capturing) hears script errors only, not a resource that failed to load.
COLLECT_ERRORS = """
window.kilnPageErrors = [];
window.addEventListener("error", e => window.kilnPageErrors.push(
    e.error && e.error.message !== undefined ? String(e.error.message) : String(e.message)));
window.addEventListener("unhandledrejection", e => window.kilnPageErrors.push(
    e.reason && e.reason.message !== undefined ? String(e.reason.message) : String(e.reason)));
"""

# The highest x of run `live` in the loss chart that has a value: the last step it shows.
LAST_SHOWN_STEP = """
const plot = window.kilnCharts && window.kilnCharts.loss;
if (!plot) return -1;
const index = plot.series.findIndex(s => s.label === "live");
if (index < 0) return -1;
const xs = plot.data[0], ys = plot.data[index];
for (let i = xs.length - 1; i >= 0; i--) if (ys[i] !== null && ys[i] !== undefined) return xs[i];
return -1;
"""


def now_ms():
    return int(time.time() * 1000)


def say(line):
    # Flushed: the test reads the log after the browser exits, but a killed run keeps what it had.
    print(line, flush=True)


def wait_for(driver, script, what, timeout, *args, poll=0.02):
    """Waits until `script` (a function body) returns something truthy in the page, asking
    every `poll` seconds; fails with `what` after `timeout` seconds."""
    WebDriverWait(driver, timeout, poll_frequency=poll).until(
        lambda d: d.execute_script(script, *args), f"no {what} within {timeout} s")


def filter_runs(driver, text):
    driver.execute_script("""
        const box = document.getElementById("filter");
        box.value = arguments[0];
        box.form.requestSubmit();""", text)


def screenshot(driver, path, full_page):
    """A PNG of the viewport, or with `full_page` of the whole document: the page's content
    size, captured beyond the viewport (WebDriver's own screenshot is the viewport only)."""
    args = {"format": "png"}
    if full_page:
        size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
        args.update(captureBeyondViewport=True,
                    clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"],
                          "scale": 1})
    png = driver.execute_cdp_cmd("Page.captureScreenshot", args)["data"]
    with open(path, "wb") as f:
        f.write(base64.b64decode(png))
    say("screenshot " + path)


def live(driver, url, shot, watch_seconds):
    driver.get(url)
    wait_for(driver, 'return document.querySelectorAll("#runs tbody tr").length >= arguments[0];',
             "two rows in the table", 20, 2)
    say(f"rows {driver.execute_script(ROW_COUNT)}")

    filter_runs(driver, "status = running and")
    wait_for(driver, 'return !document.getElementById("error").hidden;', "filter error", 10)
    say("error " + driver.execute_script('return document.getElementById("error").textContent;'))

    filter_runs(driver, "status = running")
    wait_for(driver, """return document.getElementById("error").hidden &&
                               document.querySelectorAll("#runs tbody tr").length === 1;""",
             "single row for `status = running`", 10)
    name = driver.execute_script('return document.querySelector("#runs tbody tr").dataset.name;')
    say(f"filtered {driver.execute_script(ROW_COUNT)} {name}")

    driver.execute_script(
        """document.querySelector('#runs tbody tr[data-name="live"] input').click();""")
    wait_for(driver, "return !!(window.kilnCharts && window.kilnCharts.loss);", "loss chart", 10)
    start = now_ms()
    say(f"watch-start {start}")
    last = -1
    while now_ms() - start < float(watch_seconds) * 1000:
        step = driver.execute_script(LAST_SHOWN_STEP)
        if step != last:
            say(f"shown {step} {now_ms()}")
        last = step
        time.sleep(0.02)
    say(f"watch-end {now_ms()}")
    filter_runs(driver, "")
    wait_for(driver, 'return document.querySelectorAll("#runs tbody tr").length >= arguments[0];',
             "two rows after clearing the filter", 10, 2)
    screenshot(driver, shot, full_page=True)


def scale(driver, url, shot):
    driver.get(url)
    wait_for(driver, 'return document.querySelectorAll("#runs tbody tr").length === arguments[0];',
             "100 rows in the table", 30, 100)
    start = now_ms()
    driver.execute_script("""
        // The longest gap between animation frames while the runs load and the charts are drawn.
        window.loadGap = 0;
        let last = performance.now();
        const frame = now => {
          window.loadGap = Math.max(window.loadGap, now - last);
          last = now;
          if (!window.loadDone) requestAnimationFrame(frame);
        };
        requestAnimationFrame(frame);
        document.getElementById("select-all").click();""")
    # Polled each 50 ms: each poll waits for the page's main thread, so the time it answers is
    # when the page could first have been seen drawn.
    wait_for(driver, """
        const plots = Object.values(window.kilnCharts || {});
        return plots.length === 5 && plots.every(p => p.series.length === 101) &&
               window.kilnCharts.loss.data[0].length === 10000;""",
             "five charts of 101 series and 10,000 steps", 120, poll=0.05)
    say(f"rendered-ms {now_ms() - start}")
    time.sleep(0.2)
    load_gap = driver.execute_script("window.loadDone = true; return window.loadGap;")
    say(f"load-frame-gap-ms {round(load_gap)}")
    gap = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        let last = performance.now(), worst = 0;
        const end = last + 3000;
        const frame = now => {
          worst = Math.max(worst, now - last);
          last = now;
          if (now < end) requestAnimationFrame(frame); else done(worst);
        };
        requestAnimationFrame(frame);""")
    say(f"frame-gap-ms {round(gap)}")
    screenshot(driver, shot, full_page=False)


def ladder(driver, url, shot, sweep):
    driver.get(url)
    wait_for(driver, 'return document.querySelectorAll("#runs tbody tr").length > 0;',
             "rows in the table", 30)
    driver.execute_script("""
        [...document.querySelectorAll("#runs tbody a")]
            .find(a => a.textContent === arguments[0]).click();""", sweep)
    wait_for(driver, 'return document.querySelector("#ladder-view .rung") !== null;',
             "ladder of sweep " + sweep, 30)
    rungs = driver.execute_script("""
        return [...document.querySelectorAll("#ladder-view .rung")].map(c => {
          const items = [...c.querySelectorAll("li")];
          const cut = items.findIndex(li => li.classList.contains("cut"));
          return `${c.querySelector("h3").textContent.replace("step ", "")} ${cut + 1} ` +
                 items.map(li => li.querySelector("a").textContent).join(",");
        });""")
    for rung in rungs:
        say("rung " + rung)
    screenshot(driver, shot, full_page=True)


def layers(driver, url, shot, run):
    driver.get(url)
    wait_for(driver, 'return document.querySelectorAll("#runs tbody tr").length > 0;',
             "rows in the table", 30)
    driver.execute_script(
        """document.querySelector(`#runs tbody tr[data-name="${arguments[0]}"] input`).click();""",
        run)
    # Every chart drawn: the layer measures' are the last ones made.
    wait_for(driver, """const plots = window.kilnCharts || {};
                        const names = Object.keys(plots);
                        return names.length === document.querySelectorAll(".chart").length &&
                               names.some(n => n.startsWith("moe_"));""", "layer charts", 30)
    charts = driver.execute_script("""
        return Object.entries(window.kilnCharts).filter(([name]) => name.startsWith("moe_"))
            .map(([name, plot]) => name + " " + plot.data[0]
                .map((x, i) => [x, plot.data[1][i]]).filter(([, y]) => y !== null)
                .map(([x, y]) => `${x}:${y}`).join(","));""")
    for chart in sorted(charts):
        say("layer " + chart)
    screenshot(driver, shot, full_page=True)
    # The compare view of that run alone, as its address names it.
    driver.execute_script("""location.hash = "#compare/" + document.querySelector(
                             `#runs tbody tr[data-name="${arguments[0]}"]`).dataset.id;""", run)
    wait_for(driver, 'return document.getElementById("group-metric") !== null;',
             "compare form", 30)
    for name in driver.execute_script(
            """return [...document.querySelectorAll("#group-metric option")]
                   .map(o => o.value).filter(v => v.startsWith("moe_"));"""):
        say("compare-metric " + name)


def start_browser():
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("KILN_CHROMIUM", "/usr/bin/chromium")
    # Chromium's sandbox cannot start as root (a CI container), nor as a user where the kernel
    # or AppArmor forbids unprivileged user namespaces; the test browser only ever
    # loads this test's own page on 127.0.0.1, which the sandbox would not protect anything from.
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={WIDTH},{HEIGHT}"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def prepare_page(driver):
    # The page's viewport exactly, whatever the window's frame takes of --window-size.
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1,
                            "mobile": False})
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": COLLECT_ERRORS})
    # A million points may hold the page's main thread for seconds, and every script waits for it.
    driver.set_script_timeout(130)


def report_page_errors(driver):
    try:
        errors = driver.execute_script("return window.kilnPageErrors || [];")
    except Exception as e:  # the page is gone: say so rather than hide what failed before
        errors = [f"(page errors unreadable: {type(e).__name__})"]
    for error in errors:
        say("pageerror " + error)


def one_line(error):
    """A WebDriver error's message on one line, without Selenium's link to its documentation
    (chromedriver's reason comes on the second line: "no chrome binary at ...")."""
    message = getattr(error, "msg", None) or str(error)
    return "; ".join(line.split("; For documentation")[0].strip()
                     for line in message.strip().splitlines() if line.strip())


def main(argv):
    if len(argv) < 3 or argv[0] not in ("live", "scale", "ladder", "layers"):
        sys.exit(__doc__.split("Usage: ")[1])
    mode, url, shot = argv[:3]
    extra = argv[3] if len(argv) > 3 else "10"
    driver = None
    try:
        driver = start_browser()
        prepare_page(driver)
        if mode == "scale":
            scale(driver, url, shot)
        elif mode == "ladder":
            ladder(driver, url, shot, extra)
        elif mode == "layers":
            layers(driver, url, shot, extra)
        else:
            live(driver, url, shot, extra)
        report_page_errors(driver)
    except Exception as e:
        if driver:
            report_page_errors(driver)
        say(f"failed {type(e).__name__}: {one_line(e)}")
        return 1
    finally:
        if driver:
            driver.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
