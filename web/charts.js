// The curves of the selected runs: each run's rows as /api/metrics sends them (column by column,
// appended as a running run commits more), turned into one uPlot chart per metric. uPlot draws
// the lines, the zoom (drag; double-click resets), the hover values and the legend toggles.
"use strict";

const METRICS = [
  ["loss", "loss"],
  ["val_loss", "val loss"],
  ["lr", "learning rate"],
  ["grad_norm", "grad norm"],
  ["tokens_per_sec", "tokens/s"],
];
const COLUMNS = ["step", "tokens", "dt_ms", "loss", "lr", "grad_norm", "tokens_per_sec"];
const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                 "#7f7f7f", "#bcbd22", "#17becf"];

// One selected run's rows, read incrementally.
function emptyRun(id, name) {
  const rows = {};
  for (const c of COLUMNS) rows[c] = [];
  return {id, name, status: "", resumes: null, rows, evals: {step: [], loss: []}, tasks: {},
          layers: {}, time: [], seconds: 0, gone: false};
}

// Appends an /api/metrics answer; false when the run was resumed since (its rows after the
// snapshot were rewritten), and must be read again from the start.
function appendRows(run, answer) {
  if (run.resumes !== null && answer.resumes !== run.resumes) return false;
  run.resumes = answer.resumes;
  run.status = answer.run.status;
  for (const c of COLUMNS) run.rows[c].push(...answer.rows[c]);
  // x = time is the step time summed so far (as `kiln runs plot --x time`): pauses do not count.
  for (const dt of answer.rows.dt_ms) {
    run.seconds += (dt || 0) / 1000;
    run.time.push(run.seconds);
  }
  run.evals.step.push(...answer.evals.step);
  run.evals.loss.push(...answer.evals.loss);
  run.tasks = answer.tasks || {};  // every task score, each answer: they are few
  for (const [name, points] of Object.entries(answer.layers || {})) {
    const series = run.layers[name] || (run.layers[name] = {step: [], value: []});
    series.step.push(...points.step);
    series.value.push(...points.value);
  }
  return true;
}

// The names of the layer measures (moe_1.aux_loss: a mixture of experts' router figures) some
// selected run has: per-step metrics, sent by name beside the rows.
function layerMeasuresOf(runs) {
  const names = new Set();
  for (const run of runs) for (const name of Object.keys(run.layers)) names.add(name);
  return [...names].sort();
}

// The charts: the fixed metrics, each task metric (TASK.METRIC), then each layer measure some
// selected run has.
function metricsOf(runs) {
  const names = new Set();
  for (const run of runs) for (const name of Object.keys(run.tasks)) names.add(name);
  return METRICS.concat([...names].sort().map(name => [name, name]),
                        layerMeasuresOf(runs).map(name => [name, name]));
}

// val_loss and the task metrics are evaluations: points at some steps, never smoothed.
function isEvaluation(metric) { return metric === "val_loss" || metric.includes("."); }

function lastOf(array, fallback) { return array.length ? array[array.length - 1] : fallback; }

// The x of each row on the chosen axis.
function xColumn(run, axis) {
  if (axis === "tokens") return run.rows.tokens;
  if (axis === "time") return run.time;
  return run.rows.step;
}

// Index of `step` in the sorted steps, or -1.
function indexOfStep(steps, step) {
  let lo = 0, hi = steps.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (steps[mid] === step) return mid;
    if (steps[mid] < step) lo = mid + 1; else hi = mid - 1;
  }
  return -1;
}

// Each point the mean of the finite values among itself and the `window` - 1 before it, as
// `kiln runs plot --smooth`.
function movingAverage(ys, window) {
  if (window <= 1) return ys;
  const out = new Array(ys.length);
  let sum = 0, count = 0;
  for (let i = 0; i < ys.length; i++) {
    if (ys[i] !== null && isFinite(ys[i])) { sum += ys[i]; count++; }
    const drop = i - window;
    if (drop >= 0 && ys[drop] !== null && isFinite(ys[drop])) { sum -= ys[drop]; count--; }
    out[i] = count ? sum / count : null;
  }
  return out;
}

// A run's [xs, ys] for one metric; an evaluation's from its evals and a layer measure's from its
// points, placed at their steps' x. A row without an x (no tokens count) is left out.
function runSeries(run, metric, options) {
  const xs = xColumn(run, options.x);
  const px = [], py = [];
  const layer = run.layers[metric];
  const evaluation = !layer && isEvaluation(metric);
  if (layer || evaluation) {
    const evals = layer || (metric === "val_loss" ? {step: run.evals.step, value: run.evals.loss}
                                                  : run.tasks[metric] || {step: [], value: []});
    evals.step.forEach((step, i) => {
      const at = indexOfStep(run.rows.step, step);
      const x = options.x === "step" ? step : (at < 0 ? null : xs[at]);
      if (x !== null) { px.push(x); py.push(evals.value[i]); }
    });
  } else {
    const ys = run.rows[metric];
    for (let i = 0; i < xs.length; i++) {
      if (xs[i] !== null) { px.push(xs[i]); py.push(ys[i]); }
    }
  }
  // Evaluations are few and far apart: averaging them would shift the best val loss the table
  // shows, so only per-step metrics are smoothed.
  let smooth = evaluation ? py : movingAverage(py, options.smooth);
  if (options.logY) smooth = smooth.map(y => (y !== null && y > 0 ? y : null));
  return [px, smooth];
}

function colorOf(runId) { return PALETTE[runId % PALETTE.length]; }

// All runs' series on one x: uPlot's join fills a run's missing x with null (a gap that the line
// spans, as runs log different steps).
function chartData(runs, metric, options) {
  const tables = runs.map(run => runSeries(run, metric, options));
  if (!tables.length) return [[]];
  const nullModes = tables.map(() => [0, 2]);  // 2: a gap the line is drawn across
  return uPlot.join(tables, nullModes);
}

function axisLabel(axis) { return axis === "time" ? "time (s)" : axis; }

function chartOptions(metric, title, runs, options, width) {
  return {
    title, width, height: 300,
    scales: {x: {time: false}, y: {distr: options.logY ? 3 : 1}},
    axes: [{label: axisLabel(options.x)}, {size: 70}],
    series: [{label: axisLabel(options.x)}].concat(runs.map(run => ({
      label: run.name, stroke: colorOf(run.id), width: 1.5, spanGaps: true,
      points: {show: isEvaluation(metric) && !layerMeasuresOf(runs).includes(metric)},
    }))),
    cursor: {drag: {x: true, y: false}},
  };
}

// The charts of the selected runs, one per metric: rebuilt when the runs or options change,
// given new data otherwise (keeping a zoom the user made, unless it showed everything).
class Charts {
  constructor(container) {
    this.container = container;
    this.plots = {};
    this.key = "";
    window.kilnCharts = this.plots;  // what the browser test reads
  }

  render(runs, options) {
    const key = JSON.stringify([runs.map(r => r.id), options, metricsOf(runs)]);
    if (key !== this.key) this.rebuild(runs, options, key);
    else this.update(runs, options);
  }

  // Each chart is drawn in a task of its own, so that the page keeps painting between them:
  // at 100 runs of 10,000 steps one chart is a million points.
  rebuild(runs, options, key) {
    for (const plot of Object.values(this.plots)) plot.destroy();
    for (const name of Object.keys(this.plots)) delete this.plots[name];
    this.container.textContent = "";
    this.key = key;
    if (!runs.length) return;
    const width = Math.max(360, Math.floor((this.container.clientWidth - 24) / 2));
    for (const [metric, title] of metricsOf(runs)) {
      const box = document.createElement("div");
      box.className = "chart";
      box.id = "chart-" + metric;
      this.container.appendChild(box);
      setTimeout(() => {
        if (this.key !== key) return;  // rebuilt again meanwhile
        const data = chartData(runs, metric, options);
        const settings = chartOptions(metric, title, runs, options, width);
        this.plots[metric] = new uPlot(settings, data, box);
      }, 0);
    }
  }

  update(runs, options) {
    for (const [metric] of metricsOf(runs)) {
      const plot = this.plots[metric];
      if (!plot) continue;  // still to be drawn, with the newest rows
      const x = plot.data[0];
      const showingAll =
          !x.length || (plot.scales.x.min <= x[0] && plot.scales.x.max >= lastOf(x, 0));
      plot.setData(chartData(runs, metric, options), showingAll);
    }
  }
}
