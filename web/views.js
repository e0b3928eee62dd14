// A run's page (#run/ID: what `kiln runs show` prints), the compare view (#compare/ID,ID...:
// config keys that differ, and with a grouping the seeds' means in their bands, as
// `kiln runs compare --group-by` and `kiln runs plot --group-by` show them), and an asha sweep's
// rung ladder (#ladder/SWEEP: what `kiln sweep status` prints, drawn as one column a rung).
"use strict";

function element(tag, text, className) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (className) e.className = className;
  return e;
}

function table(header, rows) {
  const t = element("table", undefined, "plain");
  const head = element("tr");
  for (const h of header) head.appendChild(element("th", h));
  t.appendChild(head);
  for (const row of rows) {
    const tr = element("tr");
    for (const v of row) {
      tr.appendChild(element("td", v === null || v === undefined ? "-" : String(v)));
    }
    t.appendChild(tr);
  }
  return t;
}

function backLink() {
  const a = element("a", "← all runs");
  a.href = "#";
  return a;
}

// The failure of a view: the page says what the server said (a deleted run, a bad grouping).
function viewError(section, body) {
  section.replaceChildren(backLink(), element("p", body.error, "error-line"));
}

async function showRunPage(id) {
  const section = document.getElementById("run-view");
  section.replaceChildren(element("p", "loading run " + id + "…"));
  const {status, body} = await api("run?run=" + encodeURIComponent(id));
  if (status !== 200) return viewError(section, body);
  const r = body.run;
  const best = b => (b ? `${b.loss} at step ${b.step}` : "-");
  section.replaceChildren(
      backLink(), element("h2", `${r.name} (run ${r.id})`),
      table(["status", "sweep", "created", "finished", "steps", "best loss", "best val",
             "tokens/s", "config hash"],
            [[r.status, r.sweep, r.created_at, r.finished_at, `${r.steps}/${r.planned_steps}`,
              best(body.best_loss), best(body.best_val),
              r.tokens_per_sec === null ? "-" : r.tokens_per_sec.toFixed(0), r.config_hash]]),
      table(["experiment", "git commit", "host", "folder"],
            [[body.experiment, body.git_commit, body.host, body.folder]]));
  if (body.error) section.appendChild(element("p", "error: " + body.error, "error-line"));
  if (body.mixture.length > 0) {  // a blend: each source's share asked and taken
    section.appendChild(element("h3", "data mixture"));
    section.appendChild(table(["source", "weight", "asked", "tokens", "realised"],
                              body.mixture.map(m => [m.source, m.weight, m.asked, m.tokens,
                                                     m.realised])));
  }
  section.appendChild(element("h3", "evals"));
  section.appendChild(table(["step", "split", "checkpoint", "loss", "perplexity"],
                            body.evals.map(e => [e.step, e.split, e.checkpoint, e.loss,
                                                 e.perplexity])));
  section.appendChild(element("h3", "snapshots"));
  section.appendChild(table(["label", "step", "path", "created"],
                            body.snapshots.map(s => [s.label, s.step, s.path, s.created_at])));
  section.appendChild(element("h3", "resumes"));
  section.appendChild(table(["from step", "changes", "at"],
                            body.resumes.map(s => [s.from_step, s.changes, s.created_at])));
  section.appendChild(element("h3", "resolved config"));
  section.appendChild(element("pre", body.config));
}

// `layerMeasures`: the store's (moe_1.aux_loss), pickable as any metric.
function compareForm(ids, groupBy, metric, layerMeasures) {
  const form = element("form", undefined, "compare-form");
  const group = element("input");
  group.id = "group-by";
  group.value = groupBy;
  group.placeholder = "group by: auto, or config keys a,b";
  const pick = element("select");
  pick.id = "group-metric";
  for (const [m, title] of METRICS.concat(layerMeasures.map(name => [name, name]))) {
    const o = element("option", title);
    o.value = m;
    o.selected = m === metric;
    pick.appendChild(o);
  }
  form.append(element("label", "group seeds by "), group, pick, element("button", "Group"));
  form.addEventListener("submit", e => {
    e.preventDefault();
    showCompare(ids, group.value, pick.value);
  });
  return form;
}

// Each group's mean as a line and its band (95% CI of the mean, or min-max) shaded around it.
function groupChart(groups, metric) {
  const x = groups.length ? groups[0].x : [];
  const tables = groups.map(g => [g.x, g.mean]).concat(groups.map(g => [g.x, g.low]),
                                                       groups.map(g => [g.x, g.high]));
  const data = tables.length ? uPlot.join(tables) : [x];
  const n = groups.length;
  const series = [{label: "x"}];
  groups.forEach((g, i) => {
    series.push({label: g.label, stroke: PALETTE[i % PALETTE.length], width: 2});
  });
  groups.forEach(g => series.push({label: g.label + " low", show: true, stroke: "transparent"}));
  groups.forEach(g => series.push({label: g.label + " high", show: true, stroke: "transparent"}));
  const bands = groups.map((g, i) => ({series: [1 + 2 * n + i, 1 + n + i],
                                       fill: PALETTE[i % PALETTE.length] + "33"}));
  const box = element("div", undefined, "chart");
  box.id = "chart-groups";
  new uPlot({title: `${metric}: mean of each group`, width: 900, height: 360, series, bands,
             scales: {x: {time: false}}}, data, box);
  // The band edges are series only for uPlot to shade between: not legend entries.
  box.querySelectorAll(".u-legend .u-series").forEach((row, i) => {
    if (i > n) row.style.display = "none";
  });
  return box;
}

async function showCompare(ids, groupBy = "auto", metric = "loss") {
  const section = document.getElementById("compare-view");
  section.replaceChildren(element("p", "comparing…"));
  const query = `compare?runs=${encodeURIComponent(ids)}&group_by=${encodeURIComponent(groupBy)}` +
                `&metric=${encodeURIComponent(metric)}`;
  const {status, body} = await api(query);
  const names = [];
  if (status === 200) for (const r of body.runs) names.push(r.name);
  const form = compareForm(ids, groupBy, metric, body.layer_measures || []);
  section.replaceChildren(backLink(), element("h2", "compare"), form);
  if (status !== 200) return section.appendChild(element("p", body.error, "error-line"));
  section.appendChild(element("h3", "config keys that differ"));
  section.appendChild(body.differing.length
                          ? table(["key"].concat(names),
                                  body.differing.map(d => [d.key].concat(d.values)))
                          : element("p", "none besides run.name"));
  if (body.groups) {
    section.appendChild(element("h3", "groups"));
    section.appendChild(groupChart(body.groups, metric));
    section.appendChild(element("pre", body.report));
  }
}

// The ladder: one column a rung, its members best first; the line under the best `keep` of a
// rung is where the rest stop; each member links to its run's page.
async function showLadder(sweep) {
  const section = document.getElementById("ladder-view");
  section.replaceChildren(element("p", "reading the ladder of " + sweep + "…"));
  const {status, body} = await api("ladder?sweep=" + encodeURIComponent(sweep));
  if (status !== 200) return viewError(section, body);
  const columns = element("div", undefined, "ladder");
  body.rungs.forEach((rung, j) => {
    const last = j + 1 === body.rungs.length;
    const column = element("div", undefined, "rung");
    column.appendChild(element("h3", `step ${rung.step}`));
    column.appendChild(element("p", `${rung.members.length} member(s)` +
                                    (last ? "" : `, the best ${rung.keep} go on`), "hint"));
    const list = element("ol");
    for (const m of rung.members) {
      const item = element("li", undefined, "rung-member state-" + m.state.split(" ")[0]);
      if (!last && m.place === rung.keep) item.classList.add("cut");
      const link = element("a", m.name);
      link.href = "#run/" + m.run;
      // A cooled score (an asha search with rung_cooldown) shows the trajectory's own beside it.
      const uncooled = m.uncooled == null ? "" : ` (cooled; un-cooled ${m.uncooled.toFixed(4)})`;
      item.append(link,
                  element("span", ` ${m.value === null ? "-" : m.value.toFixed(4)}${uncooled} `),
                  element("span", m.state, "hint"));
      list.appendChild(item);
    }
    column.appendChild(list);
    columns.appendChild(column);
  });
  section.replaceChildren(backLink(),
                          element("h2", `${body.sweep}: ${body.metric} (${body.mode}) at each rung`),
                          columns);
}
