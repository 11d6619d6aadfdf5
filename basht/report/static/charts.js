/* Basht's interactive charts of one run, drawn with Chart.js from the JSON that
 * basht/report/charts.py builds. The same file draws them in `basht dashboard` (updated as the
 * run goes on) and in the one-file report of `basht report --html`.
 *
 *   const view = BashtCharts.mount(element, data);   // draws
 *   view.update(newData);                            // redraws in place, zoom kept
 *
 * Hovering a point or a bar shows its trial's configuration; dragging on a chart zooms into
 * the box (Ctrl + wheel zooms too) and a double-click resets it; the chips above the charts
 * show or hide the trials of each state in every chart at once.
 */
(function () {
  "use strict";

  const CSS = `
.bc-filter { display: flex; flex-wrap: wrap; gap: .4rem; align-items: center; margin: .4rem 0 .8rem; }
.bc-filter .bc-label { color: #555; margin-right: .2rem; }
.bc-chip { border: 1px solid #ccc; border-radius: 999px; padding: .1rem .65rem .1rem .45rem;
  background: #fff; cursor: pointer; font: inherit; font-size: .85rem; color: #222; }
.bc-chip .bc-dot { display: inline-block; width: .7rem; height: .7rem; border-radius: 50%;
  margin-right: .35rem; vertical-align: -1px; }
.bc-chip.bc-off { opacity: .45; text-decoration: line-through; }
.bc-hint { color: #777; font-size: .8rem; margin-left: auto; }
.bc-grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 1rem; }
.bc-card { margin: 0; border: 1px solid #e2e2e2; border-radius: 6px; padding: .6rem .8rem .8rem;
  background: #fff; min-width: 0; }
.bc-card.bc-wide { grid-column: 1 / -1; }
.bc-card figcaption { font-weight: 600; font-size: .95rem; margin-bottom: .1rem; color: #222; }
.bc-card .bc-sub { color: #666; font-size: .8rem; font-weight: normal; }
.bc-canvas { position: relative; height: 260px; }
.bc-wide .bc-canvas { height: 240px; }
.bc-empty { position: absolute; inset: 0; display: flex; align-items: center;
  justify-content: center; color: #888; font-size: .9rem; pointer-events: none; }
`;

  // -- formatting -------------------------------------------------------------------------

  function fmt(v) {
    if (v === null || v === undefined || Number.isNaN(v)) return "–";
    if (typeof v !== "number") return String(v);
    if (Number.isInteger(v) && Math.abs(v) < 1e7) return String(v);
    const a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e7)) return v.toExponential(2).replace(/\.?0+e/, "e");
    return String(Number(v.toPrecision(4)));
  }

  // The smallest of 1, 2, 2.5, 5 times a power of ten at or above v: an axis' round top.
  function niceMax(v) {
    if (!(v > 0)) return 1;
    const power = Math.pow(10, Math.floor(Math.log10(v)));
    for (const step of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) {
      if (step * power >= v * (1 - 1e-9)) return step * power;
    }
    return 10 * power;
  }

  function configLines(config) {
    if (!config) return [];
    return Object.keys(config).map((k) => `  ${k} = ${fmt(config[k])}`);
  }

  // An energy unit that keeps the numbers readable: a smoke test uses joules, a GPU job kWh.
  function energyUnit(maxKwh) {
    if (maxKwh < 1e-4) return { unit: "J", factor: 3.6e6 };
    if (maxKwh < 1) return { unit: "Wh", factor: 1e3 };
    return { unit: "kWh", factor: 1 };
  }

  function carbonUnit(maxG) {
    if (maxG < 0.1) return { unit: "mg CO2eq", factor: 1e3 };
    if (maxG < 1e4) return { unit: "g CO2eq", factor: 1 };
    return { unit: "kg CO2eq", factor: 1e-3 };
  }

  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else node.setAttribute(k, v);
    }
    for (const child of children || []) node.append(child);
    return node;
  }

  function injectStyle() {
    if (document.getElementById("bc-style")) return;
    const style = el("style", { id: "bc-style" });
    style.textContent = CSS;
    document.head.append(style);
  }

  // -- the parts every chart shares -------------------------------------------------------

  function zoom(mode) {
    return {
      zoom: {
        drag: { enabled: true, backgroundColor: "rgba(31,119,180,0.12)", borderColor: "#1f77b4", borderWidth: 1 },
        wheel: { enabled: true, modifierKey: "ctrl" },
        pinch: { enabled: false },
        mode: mode,
      },
      pan: { enabled: false },
    };
  }

  function axis(title, extra) {
    return Object.assign(
      {
        type: "linear",
        title: { display: true, text: title, color: "#555" },
        ticks: { callback: (v) => fmt(v), color: "#555", maxTicksLimit: 8, includeBounds: false },
        grid: { color: "#eee" },
      },
      extra || {}
    );
  }

  function baseOptions(mode) {
    return {
      responsive: true,
      maintainAspectRatio: false,
      animation: false,
      parsing: true,
      interaction: { mode: "nearest", intersect: true },
      plugins: {
        legend: { labels: { boxWidth: 12, boxHeight: 12, color: "#333" } },
        tooltip: { displayColors: false, bodyFont: { family: "ui-monospace, monospace", size: 11 } },
        zoom: zoom(mode),
      },
    };
  }

  // A chart's options: the shared ones for `mode` (the zoom's axes), `extra` over them, and
  // `tooltip` (its callbacks, a filter) over the shared tooltip.
  function chartOptions(mode, extra, tooltip) {
    const options = baseOptions(mode);
    Object.assign(options.plugins.tooltip, tooltip);
    return Object.assign(options, extra);
  }

  // Each chart: `card` sets up its figure, `build(data, shown)` returns {data, options}.
  const CHARTS = {
    states: {
      title: "Trials by state",
      build(data) {
        const states = Object.keys(data.counts);
        return {
          type: "bar",
          data: {
            labels: states,
            datasets: [
              {
                label: "trials",
                data: states.map((s) => data.counts[s]),
                backgroundColor: states.map((s) => data.states[s] || "#c7c7c7"),
              },
            ],
          },
          options: Object.assign(baseOptions("y"), {
            indexAxis: "y",
            plugins: { legend: { display: false }, zoom: { zoom: { drag: { enabled: false } } } },
            scales: {
              x: axis("trials", { beginAtZero: true, ticks: { precision: 0, color: "#555" } }),
              y: { ticks: { color: "#333" }, grid: { display: false } },
            },
          }),
          empty: states.length ? null : "no trials yet",
        };
      },
    },

    best: {
      title: "Best so far",
      subtitle: (data) => `${data.run.metric || "value"} (${data.run.mode}) of every report, and the best so far`,
      build(data, shown, trials) {
        const byState = {};
        for (const r of data.reports) {
          if (r.value === null) continue;
          (byState[r.state] = byState[r.state] || []).push({
            x: r.at_s, y: r.value, trial: r.trial, epoch: r.epoch, state: r.state,
          });
        }
        const datasets = Object.keys(data.states)
          .filter((s) => byState[s])
          .map((s) => ({
            type: "scatter",
            label: s,
            data: byState[s].filter(() => shown.has(s)),
            backgroundColor: data.states[s],
            borderColor: data.states[s],
            pointRadius: 3,
            pointHoverRadius: 6,
            order: 2,
          }));
        const best = data.best.map((b) => ({ x: b.at_s, y: b.value, trial: b.trial, best: true }));
        if (best.length) {
          const end = Math.max(data.run.elapsed_s || 0, best[best.length - 1].x);
          best.push(Object.assign({}, best[best.length - 1], { x: end, end: true }));
        }
        datasets.unshift({
          type: "line",
          label: "best so far",
          data: best,
          stepped: "after",
          borderColor: "#1f2937",
          backgroundColor: "#1f2937",
          borderWidth: 2,
          pointRadius: (ctx) => (ctx.raw && ctx.raw.end ? 0 : 2.5),
          order: 1,
        });
        const metric = data.run.metric || "value";
        return {
          type: "scatter",
          data: { datasets },
          options: chartOptions("xy", {
            scales: {
              x: axis("seconds since the run phase began", { min: 0 }),
              y: axis(metric),
            },
          }, {
            callbacks: {
              title: () => "",
              label: (ctx) => {
                const p = ctx.raw;
                const t = trials[p.trial] || {};
                const head = p.best
                  ? `best so far ${metric} = ${fmt(p.y)} (trial ${p.trial})`
                  : `trial ${p.trial} (${p.state}), epoch ${p.epoch}: ${metric} = ${fmt(p.y)}`;
                return [head, `at ${fmt(p.x)} s`, ...configLines(t.config)];
              },
            },
          }),
          empty: data.reports.length ? null : "no reports yet",
        };
      },
    },

    timeline: {
      title: "Trials on workers",
      wide: true,
      subtitle: () => "each bar is a trial's time on a worker, coloured by its state; white space is an idle worker",
      build(data, shown, trials) {
        const lanes = [];
        for (let i = 0; i < data.timeline.lanes; i++) lanes.push(`worker ${i}`);
        const byState = {};
        for (const s of data.timeline.segments) {
          (byState[s.state] = byState[s.state] || []).push({
            x: [s.start_s, Math.max(s.end_s, s.start_s + 1e-3)], y: `worker ${s.lane}`,
            trial: s.trial, state: s.state, start: s.start_s, end: s.end_s,
          });
        }
        const datasets = Object.keys(data.states)
          .filter((s) => byState[s])
          .map((s) => ({
            label: s,
            data: byState[s].filter(() => shown.has(s)),
            backgroundColor: data.states[s],
            borderColor: "#fff",
            borderWidth: { left: 1, right: 1 },
            borderSkipped: false,
            grouped: false,
            barPercentage: 1,
            categoryPercentage: 0.8,
          }));
        const end = Math.max(data.run.elapsed_s || 0, ...data.timeline.segments.map((s) => s.end_s));
        return {
          type: "bar",
          data: { labels: lanes, datasets },
          options: chartOptions("x", {
            indexAxis: "y",
            scales: {
              x: axis("seconds since the run phase began", { min: 0, suggestedMax: end }),
              y: { type: "category", labels: lanes, ticks: { color: "#333" }, grid: { display: false } },
            },
          }, {
            callbacks: {
              title: () => "",
              label: (ctx) => {
                const p = ctx.raw;
                const t = trials[p.trial] || {};
                return [
                  `trial ${p.trial} (${p.state}) on ${p.y}`,
                  `${fmt(p.start)} s to ${fmt(p.end)} s (${fmt(p.end - p.start)} s)`,
                  `budget ${fmt(t.budget)}${t.target_budget ? " of " + fmt(t.target_budget) : ""}, ` +
                    `${data.run.metric || "value"} = ${fmt(t.value)}`,
                  ...configLines(t.config),
                ];
              },
            },
          }),
          empty: data.timeline.segments.length ? null : "no trial has started yet",
        };
      },
    },

    energy: {
      title: "Energy and emissions so far",
      wide: (data) => !CHARTS.pareto.when(data),
      subtitle: (data) => {
        const e = data.energy;
        const source = !e.source ? "no meter read yet"
          : e.source === "estimate" ? "estimated"
          : e.source.includes("estimate") ? `partly estimated: ${e.source}` : `measured: ${e.source}`;
        const right = e.g_per_kwh ? `; right axis: its emissions at ${fmt(e.g_per_kwh)} g CO2eq/kWh` : "";
        const budgets = e.budgets || {};
        const dashed = budgets.energy_kwh || budgets.emissions_g ? "; dashed: a budget the search set" : "";
        return `the node's energy since deploy (${source})${right}${dashed}`;
      },
      build(data) {
        // One curve: the energy (left axis); the right axis reads it as emissions, at the run's
        // mean intensity so far, so a carbon budget is drawn where that energy would reach it.
        const e = data.energy;
        const budgets = e.budgets || {};
        const k = e.g_per_kwh || null;
        const carbonKwh = budgets.emissions_g && k ? budgets.emissions_g / k : 0;
        const topKwh = Math.max(e.kwh || 0, budgets.energy_kwh || 0, carbonKwh,
          ...e.series.map((p) => p.kwh));
        const eu = energyUnit(topKwh);
        const top = niceMax(topKwh * eu.factor * 1.05);
        const cu = carbonUnit(k ? (top / eu.factor) * k : 0);
        const end = Math.max(data.run.elapsed_s || 0, ...e.series.map((p) => p.at_s), 1);
        const start = Math.min(0, ...e.series.map((p) => p.at_s));
        const flat = (y, label, colour, axisId) => ({
          label, data: [{ x: start, y }, { x: end, y }], borderColor: colour, backgroundColor: colour,
          borderDash: [6, 4], pointRadius: 0, borderWidth: 1.5, yAxisID: axisId, budget: true,
        });
        const datasets = [
          {
            label: `energy (${eu.unit})`,
            data: e.series.map((p) => ({ x: p.at_s, y: p.kwh * eu.factor, kwh: p.kwh, g: p.emissions_g })),
            borderColor: "#1f77b4", backgroundColor: "rgba(31,119,180,0.12)",
            fill: "origin", pointRadius: 0, pointHitRadius: 6, borderWidth: 2, yAxisID: "y",
          },
        ];
        if (budgets.energy_kwh) {
          datasets.push(flat(budgets.energy_kwh * eu.factor,
            `energy budget ${fmt(budgets.energy_kwh * eu.factor)} ${eu.unit}`, "#1f77b4", "y"));
        }
        if (budgets.emissions_g && k) {
          datasets.push(flat(budgets.emissions_g * cu.factor,
            `carbon budget ${fmt(budgets.emissions_g * cu.factor)} ${cu.unit}`, "#8c564b", "y2"));
        }
        const scales = {
          x: axis("seconds since the run phase began"),
          y: axis(`energy (${eu.unit})`, { min: 0, max: top }),
        };
        if (k) {
          scales.y2 = axis(cu.unit, {
            min: 0, max: (top / eu.factor) * k * cu.factor, position: "right",
            grid: { drawOnChartArea: false }, ticks: { callback: (v) => fmt(v), color: "#8c564b", includeBounds: false },
            title: { display: true, text: cu.unit, color: "#8c564b" },
          });
        }
        return {
          type: "line",
          data: { datasets },
          options: chartOptions("x", {
            interaction: { mode: "nearest", axis: "x", intersect: false },
            scales,
          }, {
            filter: (item) => !item.dataset.budget,
            callbacks: {
              title: (items) => (items.length ? `at ${fmt(items[0].parsed.x)} s` : ""),
              label: (ctx) => {
                const p = ctx.raw;
                const lines = [`energy ${fmt(p.kwh * eu.factor)} ${eu.unit}`];
                if (p.g !== null && p.g !== undefined) lines.push(`emissions ${fmt(p.g * cu.factor)} ${cu.unit}`);
                return lines;
              },
            },
          }),
          empty: e.series.length ? null : "no power sample yet",
        };
      },
    },

    pareto: {
      title: "Pareto front",
      when: (data) => Boolean(data.objectives && data.objectives.objectives.length >= 2),
      subtitle: (data) => {
        const o = data.objectives;
        const n = o.objectives.length;
        return `feasible completed trials on the front, joined; hypervolume ${fmt(o.hypervolume)}` +
          (n > 2 ? `; the first two of ${n} objectives` : "");
      },
      build(data, shown, trials) {
        const o = data.objectives;
        const [a, b] = o.objectives;
        const point = (p) => ({
          x: p.values[a.metric], y: p.values[b.metric], trial: p.trial, state: p.state,
          values: p.values, feasible: p.feasible, on_front: p.on_front,
        });
        const visible = o.trials.filter((p) => shown.has(p.state));
        const front = visible.filter((p) => p.on_front).map(point).sort((p, q) => p.x - q.x);
        const dominated = visible.filter((p) => !p.on_front && p.feasible);
        const others = dominated.filter((p) => p.state === "completed").map(point);
        const early = dominated.filter((p) => p.state !== "completed").map(point);
        const broke = visible.filter((p) => !p.feasible).map(point);
        const chosen = visible.filter((p) => p.trial === o.chosen).map(point);
        const datasets = [
          { type: "line", label: "Pareto front", data: front, borderColor: "#1f77b4",
            backgroundColor: "#1f77b4", pointRadius: 4, pointHoverRadius: 7, borderWidth: 1.5 },
          { label: "dominated", data: others, backgroundColor: "#9ca3af", borderColor: "#9ca3af",
            pointRadius: 3.5, pointHoverRadius: 6 },
          { label: "stopped early (at its last rung)", data: early, backgroundColor: "rgba(0,0,0,0)",
            borderColor: "#9ca3af", borderWidth: 1.5, pointRadius: 3.5, pointHoverRadius: 6 },
          { label: "broke a constraint", data: broke, backgroundColor: "#d62728",
            borderColor: "#d62728", pointStyle: "crossRot", pointRadius: 5, borderWidth: 2 },
        ];
        if (chosen.length) {
          datasets.push({ label: "tested", data: chosen, pointStyle: "star", pointRadius: 9,
            borderColor: "#111", backgroundColor: "#fbbf24", borderWidth: 1.5 });
        }
        const label = (obj) => `${obj.metric} (${obj.mode})`;
        return {
          type: "scatter",
          data: { datasets },
          options: chartOptions("xy", {
            scales: { x: axis(label(a)), y: axis(label(b)) },
          }, {
            callbacks: {
              title: () => "",
              label: (ctx) => {
                const p = ctx.raw;
                const t = trials[p.trial] || {};
                const values = Object.keys(p.values).map((k) => `  ${k} = ${fmt(p.values[k])}`);
                return [`trial ${p.trial} (${p.state})${p.feasible ? "" : ", broke a constraint"}`,
                  ...values, "config:", ...configLines(t.config)];
              },
            },
          }),
          empty: o.trials.length ? null : "no trial has reported every objective yet",
        };
      },
    },
  };

  // -- one run's view ---------------------------------------------------------------------

  class View {
    constructor(root, data) {
      injectStyle();
      this.root = root;
      this.shown = new Set(Object.keys(data.states));
      this.charts = {};
      root.classList.add("bc-root");
      this.filter = el("div", { class: "bc-filter" });
      this.grid = el("div", { class: "bc-grid" });
      root.replaceChildren(this.filter, this.grid);
      this.update(data);
    }

    update(data) {
      this.data = data;
      this.trials = {};
      for (const t of data.trials) this.trials[t.trial] = t;
      this.drawFilter();
      for (const [name, spec] of Object.entries(CHARTS)) {
        if (spec.when && !spec.when(data)) continue;
        this.draw(name, spec);
      }
    }

    drawFilter() {
      const data = this.data;
      const chips = [el("span", { class: "bc-label", text: "Show trials:" })];
      for (const state of Object.keys(data.states)) {
        const n = data.counts[state];
        if (!n) continue;
        const chip = el("button", {
          type: "button",
          class: "bc-chip" + (this.shown.has(state) ? "" : " bc-off"),
          "data-state": state,
          "aria-pressed": String(this.shown.has(state)),
        });
        const dot = el("span", { class: "bc-dot" });
        dot.style.background = data.states[state];
        chip.append(dot, `${state} ${n}`);
        chip.addEventListener("click", () => {
          if (this.shown.has(state)) this.shown.delete(state);
          else this.shown.add(state);
          this.update(this.data);
        });
        chips.push(chip);
      }
      chips.push(el("span", { class: "bc-hint", text: "hover: a trial's configuration · drag: zoom · double-click: reset" }));
      this.filter.replaceChildren(...chips);
    }

    draw(name, spec) {
      const made = spec.build(this.data, this.shown, this.trials);
      let entry = this.charts[name];
      if (!entry) {
        const canvas = el("canvas", { role: "img", "aria-label": spec.title });
        const empty = el("div", { class: "bc-empty" });
        const sub = el("span", { class: "bc-sub" });
        const caption = el("figcaption", {}, [spec.title + " ", sub]);
        const holder = el("div", { class: "bc-canvas" }, [canvas, empty]);
        const card = el("figure", { class: "bc-card", "data-chart": name }, [caption, holder]);
        this.grid.append(card);
        const chart = new Chart(canvas, { type: made.type, data: made.data, options: made.options });
        canvas.addEventListener("dblclick", () => chart.resetZoom && chart.resetZoom());
        entry = this.charts[name] = { chart, empty, sub, card };
      } else {
        const chart = entry.chart;
        // Keep a zoomed range: the plugin holds it in the scales' min and max.
        const kept = {};
        const zoomed = chart.isZoomedOrPanned && chart.isZoomedOrPanned();
        if (zoomed) {
          for (const [id, scale] of Object.entries(chart.scales)) kept[id] = [scale.min, scale.max];
        }
        if (zoomed) {
          for (const [id, range] of Object.entries(kept)) {
            const scale = made.options.scales[id];
            if (scale && scale.type !== "category") Object.assign(scale, { min: range[0], max: range[1] });
          }
        }
        chart.data = made.data;
        chart.options = made.options;
        chart.update("none");
      }
      const wide = typeof spec.wide === "function" ? spec.wide(this.data) : spec.wide;
      entry.card.classList.toggle("bc-wide", Boolean(wide));
      entry.sub.textContent = spec.subtitle ? "— " + spec.subtitle(this.data) : "";
      entry.empty.textContent = made.empty || "";
    }
  }

  window.BashtCharts = {
    mount: (root, data) => new View(root, data),
    fmt: fmt,
  };
})();
