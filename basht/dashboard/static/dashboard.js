/* basht dashboard: the runs in the store, one run drawn live, and the comparisons. Reads the
 * app's JSON (/api/...); the run's charts are BashtCharts' (charts.js, shared with the HTML
 * report). A running run is polled every 2 s until it ends; the list every 3 s. */
(function () {
  "use strict";

  const POLL_RUN_MS = 2000;
  const POLL_LIST_MS = 3000;
  const PALETTE = ["#1f77b4", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#ff7f0e", "#2ca02c"];
  const main = document.getElementById("main");
  const crumbs = document.getElementById("crumbs");
  const fmt = BashtCharts.fmt;
  let timer = null;

  // -- small helpers ----------------------------------------------------------------------

  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else node.setAttribute(k, v);
    }
    for (const child of children || []) if (child !== null && child !== undefined) node.append(child);
    return node;
  }

  async function getJSON(path) {
    const response = await fetch(path, { headers: { Accept: "application/json" } });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(body.detail || `${response.status} ${response.statusText}`);
    return body;
  }

  function showError(message) {
    main.replaceChildren(el("div", { class: "error", role: "alert", text: message }));
  }

  function when(iso) {
    if (!iso) return "–";
    return iso.replace("T", " ").slice(0, 19) + " UTC";
  }

  function duration(s) {
    if (s === null || s === undefined) return "–";
    if (s < 60) return `${fmt(Number(s.toFixed(s < 10 ? 2 : 1)))} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
    return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
  }

  function energy(kwh) {
    if (kwh === null || kwh === undefined) return "–";
    if (kwh < 1e-4) return `${fmt(kwh * 3.6e6)} J`;
    if (kwh < 1) return `${fmt(kwh * 1e3)} Wh`;
    return `${fmt(kwh)} kWh`;
  }

  function grams(g) {
    if (g === null || g === undefined) return "–";
    if (g < 0.1) return `${fmt(g * 1e3)} mg`;
    if (g < 1e4) return `${fmt(g)} g`;
    return `${fmt(g / 1e3)} kg`;
  }

  function usd(v) {
    if (v === null || v === undefined) return "–";
    if (v === 0) return "0";
    return v < 0.01 ? v.toPrecision(3) : v.toFixed(2);
  }

  function pill(status) {
    return el("span", { class: `pill ${status}`, text: status });
  }

  function counts(byState, colours) {
    const node = el("span", { class: "counts" });
    for (const [state, n] of Object.entries(byState)) {
      const dot = el("i");
      dot.style.background = (colours && colours[state]) || "#c7c7c7";
      node.append(el("span", {}, [dot, `${n} ${state}`]));
    }
    return node;
  }

  function setCrumbs(parts) {
    crumbs.replaceChildren(...parts.flatMap((p, i) => (i ? [" / ", p] : [p])));
  }

  function stop() {
    if (timer !== null) clearTimeout(timer);
    timer = null;
  }

  // -- the list of runs and comparisons -----------------------------------------------------

  const STATE_COLOURS = {
    running: "#17becf", pending: "#c7c7c7", paused: "#aec7e8", completed: "#2ca02c",
    stopped: "#ff7f0e", failed: "#d62728", aborted: "#7f7f7f",
  };

  async function listPage() {
    setCrumbs([el("span", { text: "runs" })]);
    document.title = "Basht dashboard";
    let runs, comparisons;
    try {
      [runs, comparisons] = await Promise.all([getJSON("/api/runs"), getJSON("/api/comparisons")]);
    } catch (err) {
      showError(`Cannot read the runs: ${err.message}`);
      timer = setTimeout(listPage, POLL_LIST_MS * 2);
      return;
    }
    const live = runs.filter((r) => r.status === "running").length;
    const rows = runs.map((r) => {
      const total = Object.values(r.trials).reduce((a, b) => a + b, 0);
      return el("tr", { "data-run": r.id }, [
        el("td", { class: "mono nowrap" }, [el("a", { href: `/runs/${encodeURIComponent(r.id)}`, text: r.id })]),
        el("td", { text: r.experiment || "–" }),
        el("td", { class: "nowrap", text: `${r.system} / ${r.executor}` }),
        el("td", {}, [pill(r.status)]),
        el("td", { class: "nowrap", text: when(r.started_at) }),
        el("td", { class: "num", text: String(total) }),
        el("td", {}, [counts(r.trials, STATE_COLOURS)]),
        el("td", { class: "num", text: r.best_value === null ? "–" : `${fmt(r.best_value)}` }),
        el("td", { class: "muted nowrap", text: r.metric ? `${r.metric} (${r.mode})` : "" }),
      ]);
    });
    const head = ["run", "experiment", "system", "status", "started", "trials", "", "best", ""];
    const table = el("table", { id: "runs" }, [
      el("thead", {}, [el("tr", {}, head.map((h) => el("th", { text: h })))]),
      el("tbody", {}, rows),
    ]);
    const body = [
      el("h1", { text: "Runs" }),
      el("p", {
        class: "meta",
        text: `${runs.length} run${runs.length === 1 ? "" : "s"} in the store` +
          (live ? `, ${live} running` : "") + " · newest first · refreshed every few seconds",
      }),
      el("div", { class: "panel" }, [runs.length ? table : el("p", { class: "empty", text: "No run yet: start one with basht run FILE." })]),
    ];
    if (comparisons.length) {
      body.push(el("h2", { text: "Comparisons" }));
      body.push(el("div", { class: "panel" }, [el("table", { id: "comparisons" }, [
        el("thead", {}, [el("tr", {}, ["comparison", "experiment", "columns", "seeds", "runs"].map((h) => el("th", { text: h })))]),
        el("tbody", {}, comparisons.map((c) => el("tr", {}, [
          el("td", { class: "mono" }, [el("a", { href: `/comparisons/${encodeURIComponent(c.id)}`, text: c.id })]),
          el("td", { text: c.experiment }),
          el("td", { text: c.columns.join(", ") }),
          el("td", { text: c.seeds.join(", ") }),
          el("td", { class: "num", text: String(c.runs.length) }),
        ]))),
      ])]));
    }
    main.replaceChildren(...body);
    timer = setTimeout(listPage, POLL_LIST_MS);
  }

  // -- one run ------------------------------------------------------------------------------

  function card(key, label, value, note, budget) {
    const children = [el("div", { class: "label", text: label }), el("div", { class: "value" }, [value])];
    if (note) children.push(el("div", { class: "note" }, [note]));
    if (budget) {
      const share = Math.min(1, budget.used / budget.limit);
      const fill = el("div");
      fill.style.width = `${(share * 100).toFixed(1)}%`;
      children.push(el("div", { class: "bar" + (budget.used >= budget.limit ? " over" : "") }, [fill]));
    }
    return el("div", { class: "card", "data-card": key }, children);
  }

  function best(data) {
    const run = data.run;
    if (run.best.value !== null) return run.best;
    const last = data.best[data.best.length - 1];
    if (!last) return null;
    const trial = data.trials.find((t) => t.trial === last.trial) || {};
    return { trial: last.trial, value: last.value, config: trial.config };
  }

  function budgetNote(used, limit, show) {
    if (!limit) return null;
    const share = (100 * used) / limit;
    return `${share < 10 ? share.toFixed(1) : Math.round(share)} % of the ${show(limit)} budget`;
  }

  function cards(data) {
    const run = data.run;
    const e = data.energy;
    const total = data.trials.length;
    const top = best(data);
    const config = top && top.config
      ? Object.entries(top.config).map(([k, v]) => `${k}=${fmt(v)}`).join(", ")
      : null;
    const status = el("span", {}, [pill(run.status)]);
    const why = run.error || run.stop_reason;
    const source = e.source ? (e.source.includes("estimate") ? "estimated" : `measured (${e.source})`) : "no meter read yet";
    const b = e.budgets || {};
    return el("div", { class: "cards", id: "cards" }, [
      card("status", "status", status, why ? why : run.live ? "live: updated every 2 s" : `ended ${when(run.ended_at)}`),
      card("trials", run.max_trials ? `trials (of ${run.max_trials})` : "trials",
        el("span", { id: "trial-count", text: String(total) }), counts(data.counts, data.states)),
      card("best", `best ${run.metric || "value"} (${run.mode})`, top ? fmt(top.value) : "–",
        top ? `trial ${top.trial}${config ? ": " + config : ""}` : "no report yet"),
      card("energy", "energy", energy(e.kwh), budgetNote(e.kwh, b.energy_kwh, energy) || source,
        b.energy_kwh ? { used: e.kwh, limit: b.energy_kwh } : null),
      card("emissions", "emissions (CO2eq)", grams(e.emissions_g),
        budgetNote(e.emissions_g, b.emissions_g, grams) || (e.g_per_kwh ? `${fmt(e.g_per_kwh)} g CO2eq/kWh` : source),
        b.emissions_g ? { used: e.emissions_g, limit: b.emissions_g } : null),
      card("cost", "cost (USD)", usd(e.cost_usd),
        budgetNote(e.cost_usd || 0, b.cost_usd, (v) => `${usd(v)} USD`) || (run.live ? "billed so far" : "OC, the job's bill"),
        b.cost_usd ? { used: e.cost_usd || 0, limit: b.cost_usd } : null),
      card("run-phase", "run phase", duration(run.elapsed_s),
        budgetNote(run.elapsed_s || 0, run.time_budget_s, duration) || (run.live ? "so far" : "tuning time"),
        run.time_budget_s ? { used: run.elapsed_s || 0, limit: run.time_budget_s } : null),
    ]);
  }

  function metricsTable(data) {
    if (!data.metrics.length) {
      return el("p", { class: "empty", text: data.run.live ? "The Table 2 metrics are computed when the run ends." : "No metrics were stored for this run." });
    }
    return el("table", { id: "metrics" }, [
      el("thead", {}, [el("tr", {}, ["metric", "value", "unit", "source"].map((h) => el("th", { text: h })))]),
      el("tbody", {}, data.metrics.map((m) => el("tr", {}, [
        el("td", { text: m.name }),
        el("td", { class: "num", text: fmt(m.value) }),
        el("td", { text: m.unit }),
        el("td", { class: "muted", text: m.source || "" }),
      ]))),
    ]);
  }

  function phasesTable(data) {
    if (!data.phases.length) return el("p", { class: "empty", text: "No phase has ended yet." });
    return el("table", { id: "phases" }, [
      el("thead", {}, [el("tr", {}, ["phase", "attempt", "seconds"].map((h) => el("th", { text: h })))]),
      el("tbody", {}, data.phases.map((p) => el("tr", {}, [
        el("td", { text: p.name }),
        el("td", { class: "num", text: String(p.attempt) }),
        el("td", { class: "num", text: fmt(p.duration_s) }),
      ]))),
    ]);
  }

  async function runPage(id) {
    setCrumbs([el("a", { href: "/", text: "runs" }), el("span", { text: id })]);
    document.title = `${id} · Basht dashboard`;
    let view = null;
    let parts = null;
    async function refresh() {
      let data;
      try {
        data = await getJSON(`/api/runs/${encodeURIComponent(id)}`);
      } catch (err) {
        if (view === null) {
          showError(err.message);
          return;
        }
        parts.banner.textContent = `Lost the dashboard server (${err.message}); trying again…`;
        timer = setTimeout(refresh, POLL_RUN_MS * 2);
        return;
      }
      const run = data.run;
      document.body.dataset.status = run.status;
      if (view === null) {
        parts = {
          title: el("h1", { id: "run-id", text: run.id }),
          meta: el("p", { class: "meta" }),
          banner: el("div", { class: "muted", role: "status" }),
          cards: el("div"),
          charts: el("div", { id: "charts" }),
          metrics: el("div", { class: "panel" }),
          phases: el("div", { class: "panel" }),
        };
        main.replaceChildren(
          parts.title, parts.meta, parts.banner, parts.cards,
          el("h2", { text: "Charts" }), parts.charts,
          el("div", { class: "split" }, [
            el("div", {}, [el("h2", { text: "Metrics (Table 2)" }), parts.metrics]),
            el("div", {}, [el("h2", { text: "Phases" }), parts.phases]),
          ]),
        );
        view = BashtCharts.mount(parts.charts, data);
      } else {
        view.update(data);
      }
      parts.banner.textContent = "";
      parts.meta.textContent = [
        `experiment ${run.experiment}`, `${run.system} / ${run.executor}`, run.algorithm,
        `started ${when(run.started_at)}`,
      ].filter(Boolean).join(" · ");
      parts.cards.replaceChildren(cards(data));
      parts.metrics.replaceChildren(metricsTable(data));
      parts.phases.replaceChildren(phasesTable(data));
      if (run.live) timer = setTimeout(refresh, POLL_RUN_MS);
    }
    await refresh();
  }

  // -- one comparison -----------------------------------------------------------------------

  async function comparisonPage(id) {
    setCrumbs([el("a", { href: "/", text: "runs" }), el("span", { text: id })]);
    document.title = `${id} · Basht dashboard`;
    let data;
    try {
      data = await getJSON(`/api/comparisons/${encodeURIComponent(id)}`);
    } catch (err) {
      showError(err.message);
      return;
    }
    const columns = data.columns;
    const table = el("table", { id: "compare" }, [
      el("thead", {}, [el("tr", {}, [el("th"), ...columns.map((c) => el("th", { text: c }))])]),
      el("tbody", {}, data.rows.map((r) => el("tr", {}, [
        el("td", { text: r.label }), ...r.cells.map((c) => el("td", { class: "num", text: c })),
      ]))),
    ]);
    const canvas = el("canvas", { role: "img", "aria-label": "best so far by run" });
    const holder = el("div", { class: "chart" }, [canvas]);
    const runs = el("ul", {}, data.runs.map((r) => el("li", {}, [
      `${r.label}, seed ${r.seed}: `,
      r.run_id ? el("a", { href: `/runs/${encodeURIComponent(r.run_id)}`, text: r.run_id }) : "not stored",
      ` (${r.status})`,
    ])));
    main.replaceChildren(
      el("h1", { text: data.id }),
      el("p", { class: "meta", text: `experiment ${data.experiment} · seeds ${data.seeds.join(", ")} · created ${when(data.created_at)}` }),
      el("h2", { text: "Best so far" }),
      el("div", { class: "card" }, [holder]),
      el("h2", { text: "Side by side" }),
      el("div", { class: "panel" }, [table]),
      el("h2", { text: "Runs" }),
      runs,
    );
    const datasets = data.curves.map((c) => {
      const colour = PALETTE[columns.indexOf(c.column) % PALETTE.length];
      return {
        label: `${c.column} · ${c.run_id}`,
        data: c.points.map((p) => ({ x: p.at_s, y: p.value })),
        stepped: "after", borderColor: colour, backgroundColor: colour, pointRadius: 2, borderWidth: 2,
      };
    });
    const chart = new Chart(canvas, {
      type: "line",
      data: { datasets },
      options: {
        responsive: true, maintainAspectRatio: false, animation: false,
        scales: {
          x: { type: "linear", title: { display: true, text: "seconds since the run phase began" } },
          y: { title: { display: true, text: "best value so far" } },
        },
        plugins: {
          zoom: { zoom: { drag: { enabled: true }, wheel: { enabled: true, modifierKey: "ctrl" }, mode: "xy" } },
        },
      },
    });
    canvas.addEventListener("dblclick", () => chart.resetZoom());
  }

  // -- the page's route ---------------------------------------------------------------------

  async function route() {
    stop();
    getJSON("/api/info").then((info) => {
      document.getElementById("store").textContent = `${info.store} (read-only)`;
    }).catch(() => {});
    const path = decodeURIComponent(location.pathname);
    if (path === "/" || path === "") return listPage();
    const run = path.match(/^\/runs\/(.+)$/);
    if (run) return runPage(run[1]);
    const comparison = path.match(/^\/comparisons\/(.+)$/);
    if (comparison) return comparisonPage(comparison[1]);
    showError(`No page at ${path}.`);
  }

  route();
})();
