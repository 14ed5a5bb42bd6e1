// The cluster page's chart: partitions owned per broker, one sample each time htmx swaps in
// the live part (the counts travel in it as JSON), so a stopped broker's line falling to 0 and
// the others' rising is the partitions moving.
(function () {
  const keep = 150;                 // samples kept: 5 minutes at one every 2 s
  const times = [];
  const series = new Map();         // broker id -> counts, aligned with times
  let plot = null;

  function color(id) { return `hsl(${(id * 67) % 360}, 55%, 45%)`; }

  function sample() {
    const counts = document.getElementById("owner-counts");
    const ids = document.getElementById("owner-ids");
    if (!counts || !ids) return;
    const values = JSON.parse(counts.textContent);
    const brokers = JSON.parse(ids.textContent);
    times.push(Date.now() / 1000);
    for (const line of series.values()) line.push(0);   // a broker gone reads 0
    brokers.forEach((id, i) => {
      if (!series.has(id)) series.set(id, new Array(times.length).fill(null));
      series.get(id)[times.length - 1] = values[i];
    });
    if (times.length > keep) { times.shift(); for (const line of series.values()) line.shift(); }
    draw();
  }

  function draw() {
    const ids = [...series.keys()].sort((a, b) => a - b);
    const data = [times, ...ids.map((id) => series.get(id))];
    const key = ids.join(",");
    if (plot && plot.key !== key) { plot.destroy(); plot = null; }
    if (!plot) {
      const target = document.getElementById("owner-chart");
      plot = new uPlot({
        width: 640, height: 200,
        series: [{}, ...ids.map((id) => ({ label: `broker ${id}`, stroke: color(id), width: 2 }))],
        scales: { x: { time: true, auto: false },
                  y: { range: (u, min, max) => [0, Math.max(max, 1)] } },
        axes: [{}, { label: "partitions" }],
      }, data, target);
      plot.key = key;
    } else {
      plot.setData(data);
    }
    // At least the last minute on the time axis, set here: uPlot's own range for a single
    // sample spans years.
    const last = times[times.length - 1];
    plot.setScale("x", { min: Math.min(times[0], last - 60), max: last });
  }

  document.addEventListener("DOMContentLoaded", sample);
  document.body.addEventListener("htmx:afterSwap", (event) => {
    if (event.detail.target.id === "cluster-live") sample();
  });
})();
