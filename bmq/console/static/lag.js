// A group's lag per partition as a chart: one sample each time the page is loaded and each
// time htmx swaps in its live part (the lags travel in it as JSON, partition name -> lag), so
// the chart covers the time the page has been open (the last 10 minutes of it).
(function () {
  const keep = 120;                 // samples kept: 10 minutes at one every 5 s
  const stamps = [];
  const lags = new Map();           // "topic[partition]" -> lag per sample, aligned with stamps
  let chart = null;

  function hue(index) { return `hsl(${(index * 53) % 360}, 60%, 42%)`; }

  function record() {
    const sample = document.getElementById("lag-sample");
    if (!sample) return;
    const now = JSON.parse(sample.textContent);
    stamps.push(Date.now() / 1000);
    for (const values of lags.values()) values.push(null);       // no row: no point
    for (const [name, lag] of Object.entries(now)) {
      if (!lags.has(name)) lags.set(name, new Array(stamps.length).fill(null));
      lags.get(name)[stamps.length - 1] = lag;
    }
    if (stamps.length > keep) { stamps.shift(); for (const v of lags.values()) v.shift(); }
    render();
  }

  function render() {
    const names = [...lags.keys()].sort();
    const columns = [stamps, ...names.map((name) => lags.get(name))];
    const shape = names.join("|");
    if (chart && chart.shape !== shape) { chart.destroy(); chart = null; }
    if (!chart) {
      chart = new uPlot({
        width: 720, height: 220,
        series: [{}, ...names.map((name, i) => ({ label: name, stroke: hue(i), width: 2,
                                                  spanGaps: false }))],
        scales: { x: { time: true, auto: false },
                  y: { range: (u, low, high) => [0, Math.max(high || 0, 1)] } },
        axes: [{}, { label: "lag (records)" }],
      }, columns, document.getElementById("lag-chart"));
      chart.shape = shape;
    } else {
      chart.setData(columns);
    }
    // The time axis spans at least a minute (uPlot's own range for one sample is years).
    const newest = stamps[stamps.length - 1];
    chart.setScale("x", { min: Math.min(stamps[0], newest - 60), max: newest });
  }

  document.addEventListener("DOMContentLoaded", record);
  document.body.addEventListener("htmx:afterSwap", (event) => {
    if (event.detail.target.id === "group-live") record();
  });
})();
