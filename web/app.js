// The dashboard: the runs table (filtered by the --where language, sorted by the server as
// `kiln runs list --sort` sorts), the curves of the selected runs (charts.js), a run's page and
// the compare view. Read-only: every request is a GET of /api/
// (core/app/presentation/dashboard_api.h).
"use strict";

const POLL_MS = 1000;        // a running run's new rows, at most once a second
const TABLE_POLL_MS = 2000;  // statuses and new runs

const state = {
  store: null,           // the identity of the store the page shows
  sort: "id",
  where: "",
  listed: [],            // the rows of the table
  selected: new Map(),   // run id -> its rows (charts.js emptyRun)
  polling: false,
};
const $ = id => document.getElementById(id);
const charts = new Charts($("charts"));

function show(element, text) {
  element.textContent = text || "";
  element.hidden = !text;
}

// Every answer passes here: a store replaced on disk is said once and the page starts over.
async function api(path) {
  const reply = await fetch("api/" + path);
  const body = await reply.json();
  if (body.store && state.store && body.store !== state.store) {
    show($("notice"), "The run store was replaced by another file since this page read it: " +
         "showing the new store's runs; the curves of the old one were cleared.");
    state.selected.clear();
    state.store = body.store;
    refreshTable();
    drawCharts();
    throw new Error("store replaced");
  }
  if (body.store) state.store = body.store;
  return {status: reply.status, body};
}

function cell(text, className) {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

function number(v, digits) { return v === null || v === undefined ? "-" : v.toFixed(digits); }

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "-";
  const s = Math.round(seconds);
  return s < 60 ? s + "s" : s < 3600 ? Math.floor(s / 60) + "m" + (s % 60) + "s"
                                     : Math.floor(s / 3600) + "h" + Math.floor(s % 3600 / 60) + "m";
}

function runRow(run) {
  const tr = document.createElement("tr");
  tr.dataset.id = run.id;
  tr.dataset.name = run.name;
  const box = document.createElement("input");
  box.type = "checkbox";
  box.checked = state.selected.has(run.id);
  box.addEventListener("change", () => toggleRun(run, box.checked));
  const first = document.createElement("td");
  first.appendChild(box);
  tr.appendChild(first);
  tr.appendChild(cell(String(run.id), "num"));
  const name = cell("");
  const link = document.createElement("a");
  link.href = "#run/" + run.id;
  link.textContent = run.name;
  name.appendChild(link);
  tr.appendChild(name);
  tr.appendChild(cell(run.status, "status-" + run.status));
  const sweep = cell("");
  if (run.sweep) {  // an asha sweep's ladder; any other sweep's page says it has none
    const ladder = document.createElement("a");
    ladder.href = "#ladder/" + encodeURIComponent(run.sweep);
    ladder.textContent = run.sweep;
    sweep.appendChild(ladder);
  }
  tr.appendChild(sweep);
  tr.appendChild(cell(run.steps + "/" + run.planned_steps, "num"));
  tr.appendChild(cell(number(run.final_loss, 4), "num"));
  tr.appendChild(cell(number(run.best_loss, 4), "num"));
  tr.appendChild(cell(number(run.best_val, 4), "num"));
  tr.appendChild(cell(number(run.tokens_per_sec, 0), "num"));
  tr.appendChild(cell(duration(run.duration_s), "num"));
  return tr;
}

async function refreshTable() {
  const query = "runs?sort=" + encodeURIComponent(state.sort) +
                "&where=" + encodeURIComponent(state.where);
  const {status, body} = await api(query);
  if (status !== 200) {
    show($("error"), body.error);  // the command line's one error line, as it would print it
    return;
  }
  show($("error"), "");
  state.listed = body.runs;
  const tbody = $("runs").querySelector("tbody");
  const rows = document.createDocumentFragment();
  for (const run of body.runs) rows.appendChild(runRow(run));
  tbody.replaceChildren(rows);
  $("count").textContent = body.runs.length + (body.runs.length === 1 ? " run" : " runs");
  for (const th of $("runs").querySelectorAll("th[data-key]")) {
    const key = th.dataset.key;
    th.className = state.sort === key ? "sorted-up" : state.sort === "-" + key ? "sorted-down" : "";
  }
}

function chartOptionsNow() {
  return {x: $("x-axis").value, logY: $("log-y").checked,
          smooth: Math.max(1, parseInt($("smooth").value, 10) || 1)};
}

function drawCharts() {
  charts.render([...state.selected.values()], chartOptionsNow());
  $("compare-button").disabled = state.selected.size < 2;
}

// Reads a run's rows after those it has; from the start again after a resume.
async function readRun(run) {
  for (;;) {
    const after = lastOf(run.rows.step, 0), evalsAfter = lastOf(run.evals.step, 0);
    const query = `metrics?run=${run.id}&after=${after}&evals_after=${evalsAfter}`;
    const {status, body} = await api(query);
    if (status !== 200) {
      if (body.gone) {
        run.gone = true;
        show($("notice"), `Run ${run.name} is no longer in the run store (deleted, or the store ` +
             "was replaced): its curves show what was read before.");
      } else {
        show($("error"), body.error);
      }
      return;
    }
    if (!appendRows(run, body)) {
      Object.assign(run, emptyRun(run.id, run.name));
      continue;
    }
    if (!body.more) return;
  }
}

async function toggleRun(listed, on) {
  if (!on) {
    state.selected.delete(listed.id);
    drawCharts();
    return;
  }
  const run = emptyRun(listed.id, listed.name);
  state.selected.set(listed.id, run);
  await readRun(run);
  drawCharts();
}

// Once a second, the new rows of every selected run that is still training.
async function pollRunning() {
  if (state.polling) return;
  state.polling = true;
  try {
    const running = [...state.selected.values()].filter(r => r.status === "running" && !r.gone);
    const points = r => r.rows.step.length + r.evals.step.length +
                        Object.values(r.tasks).reduce((n, t) => n + t.step.length, 0) +
                        Object.values(r.layers).reduce((n, t) => n + t.step.length, 0);
    const before = running.map(points);
    await Promise.all(running.map(readRun));
    const grew = running.some((r, i) => points(r) !== before[i]);
    if (grew) drawCharts();
    $("live-status").textContent = running.length ? `live: ${running.length} running` : "";
  } catch (e) {
    // A replaced store has been said; a failed fetch (server stopped) is tried again.
  } finally {
    state.polling = false;
  }
}

async function selectAll(on) {
  for (const box of $("runs").querySelectorAll("tbody input[type=checkbox]")) box.checked = on;
  if (!on) {
    state.selected.clear();
  } else {
    const added = state.listed.filter(r => !state.selected.has(r.id))
                              .map(r => { const run = emptyRun(r.id, r.name);
                                          state.selected.set(r.id, run); return run; });
    await Promise.all(added.map(readRun));
  }
  drawCharts();
}

function route() {
  const [view, arg] = location.hash.replace(/^#/, "").split("/");
  $("list-view").hidden = view === "run" || view === "compare" || view === "ladder";
  $("run-view").hidden = view !== "run";
  $("compare-view").hidden = view !== "compare";
  $("ladder-view").hidden = view !== "ladder";
  if (view === "run") showRunPage(arg);
  else if (view === "compare") showCompare(arg);
  else if (view === "ladder") showLadder(decodeURIComponent(arg));
  else drawCharts();
}

function start() {
  $("filter-form").addEventListener("submit", event => {
    event.preventDefault();
    state.where = $("filter").value;
    refreshTable();
  });
  for (const th of $("runs").querySelectorAll("th[data-key]")) {
    th.addEventListener("click", () => {
      state.sort = state.sort === th.dataset.key ? "-" + th.dataset.key : th.dataset.key;
      refreshTable();
    });
  }
  $("select-all").addEventListener("change", e => selectAll(e.target.checked));
  $("compare-button").addEventListener("click", () => {
    location.hash = "#compare/" + [...state.selected.keys()].join(",");
  });
  for (const id of ["x-axis", "log-y", "smooth"]) $(id).addEventListener("change", drawCharts);
  window.addEventListener("hashchange", route);
  window.addEventListener("resize", () => { charts.key = ""; drawCharts(); });
  refreshTable().catch(() => {});
  setInterval(() => refreshTable().catch(() => {}), TABLE_POLL_MS);
  setInterval(pollRunning, POLL_MS);
  route();
}

start();
