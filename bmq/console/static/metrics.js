// Throughput and request latency charts of the Cluster page (uPlot), and the rates of the
// Topics page: /metrics/sample is asked every data-poll seconds while the page is open (one
// scrape of each broker's /metrics; the console scrapes nothing on its own), the first time
// twice a second apart so that rates show at once.
(function () {
  const keep = 120;                       // samples kept: 10 minutes at one every 5 s
  const charts = [
    { id: "chart-bytes", label: "bytes/s", lines: [["bytes_in", "in"], ["bytes_out", "out"]] },
    { id: "chart-messages", label: "messages/s",
      lines: [["messages_in", "in"], ["messages_out", "out"]] },
    { id: "chart-latency", label: "request latency, ms",
      lines: [["latency_p50_ms", "p50"], ["latency_p99_ms", "p99"], ["latency_mean_ms", "mean"]] },
  ];
  const colors = ["hsl(210, 60%, 45%)", "hsl(20, 70%, 50%)", "hsl(130, 45%, 40%)"];
  const times = [];
  const values = new Map();               // metric name -> samples aligned with times

  function human(n) {
    if (n === null || n === undefined) return "–";
    const units = ["", "k", "M", "G"];
    let u = 0;
    while (Math.abs(n) >= 1000 && u < units.length - 1) { n /= 1000; u++; }
    return (u ? n.toFixed(1) : n.toFixed(n < 10 ? 2 : 0)) + units[u];
  }

  function chart(spec) {
    const target = document.getElementById(spec.id);
    if (!target) return;
    const data = [times, ...spec.lines.map(([name]) => values.get(name))];
    if (!spec.plot) {
      spec.plot = new uPlot({
        width: 420, height: 180, title: spec.label,
        series: [{}, ...spec.lines.map(([, label], i) => ({ label, stroke: colors[i], width: 2,
                                                             value: (u, v) => human(v) }))],
        scales: { x: { time: true, auto: false }, y: { range: (u, min, max) => [0, Math.max(max, 1)] } },
        axes: [{}, { values: (u, ticks) => ticks.map(human) }],
      }, data, target);
    } else {
      spec.plot.setData(data);
    }
    const last = times[times.length - 1];
    spec.plot.setScale("x", { min: Math.min(times[0], last - 60), max: last });
  }

  function showTopics(topics) {
    for (const cell of document.querySelectorAll("td[data-rate-topic]")) {
      const rates = topics[cell.dataset.rateTopic] || [0, 0, 0, 0];
      const [bytesIn, messagesIn, bytesOut, messagesOut] = rates;
      cell.textContent = `${human(messagesIn)} msg/s in, ${human(messagesOut)} out · ` +
                         `${human(bytesIn)}B/s in, ${human(bytesOut)}B/s out`;
      cell.dataset.messagesIn = messagesIn;
    }
  }

  function record(doc) {
    const status = document.getElementById("metrics-status");
    if (status) {
      status.textContent = `scraped ${doc.answered.length} broker port(s)` +
        (doc.failed.length ? `; no answer from ${doc.failed.join("; ")}` : "");
    }
    if (!doc.rates) return;
    if (doc.topics) showTopics(doc.topics);
    times.push(doc.at);
    for (const spec of charts) {
      for (const [name] of spec.lines) {
        if (!values.has(name)) values.set(name, new Array(times.length - 1).fill(null));
        values.get(name).push(doc.rates[name]);
      }
    }
    if (times.length > keep) { times.shift(); for (const line of values.values()) line.shift(); }
    charts.forEach(chart);
    document.getElementById("metrics").dataset.samples = times.length;
    const now = document.getElementById("metrics-now");
    if (now) {
      now.dataset.bytesIn = doc.rates.bytes_in;
      now.dataset.messagesIn = doc.rates.messages_in;
      now.dataset.latencyP99 = doc.rates.latency_p99_ms;
      now.textContent = `now: ${human(doc.rates.messages_in)} msg/s in, ` +
        `${human(doc.rates.messages_out)} msg/s out, ${human(doc.rates.requests)} requests/s, ` +
        `p99 ${human(doc.rates.latency_p99_ms)} ms`;
    }
  }

  function ask(url) {
    return fetch(url).then((r) => r.json()).then(record).catch(() => {});
  }

  document.addEventListener("DOMContentLoaded", () => {
    const root = document.getElementById("metrics");
    if (!root) return;
    const url = root.dataset.url;
    const poll = Number(root.dataset.poll) * 1000;
    ask(url).then(() => setTimeout(() => ask(url), 1000))
            .then(() => setInterval(() => ask(url), poll));
  });
})();
