// Inline SVG charts drawn here: bars per day, stacked shares, ranked bars. Values may be BigInt
// (wei): only the ratio to the largest value becomes a Number, to place pixels.
import { h, table, uid } from "./ui.js";

const ratio = (value, max) => {
  const v = BigInt(value);
  const m = BigInt(max);
  if (m === 0n) return 0;
  return Number((v * 10000n) / m) / 10000;
};

const maxOf = (values) => values.reduce((m, v) => (BigInt(v) > m ? BigInt(v) : m), 0n);

/**
 * Vertical bars, one per label (days). `format` writes a value for labels and the data table.
 * The figure has a text alternative: a caption, a summary for screen readers, and the table.
 */
export function barChart({ title, labels, values, format = String, className = "" }) {
  const width = 640;
  const height = 200;
  const pad = { top: 12, right: 8, bottom: 28, left: 8 };
  const max = maxOf(values);
  const slot = (width - pad.left - pad.right) / Math.max(1, labels.length);
  const barWidth = Math.max(2, slot * 0.7);
  const plotHeight = height - pad.top - pad.bottom;
  const titleId = uid("chart");
  const bars = labels.map((label, i) => {
    const barHeight = Math.round(ratio(values[i], max) * plotHeight);
    const x = pad.left + i * slot + (slot - barWidth) / 2;
    const y = pad.top + plotHeight - barHeight;
    return h(
      "g",
      {},
      h("rect", {
        x: x.toFixed(1),
        y,
        width: barWidth.toFixed(1),
        height: Math.max(barHeight, BigInt(values[i]) > 0n ? 1 : 0),
        class: "bar",
      }),
      h("title", {}, `${label}: ${format(values[i])}`),
      i % Math.ceil(labels.length / 7) === 0
        ? h(
            "text",
            { x: (x + barWidth / 2).toFixed(1), y: height - 8, class: "axis", "text-anchor": "middle" },
            label.slice(5),
          )
        : null,
    );
  });
  const svg = h(
    "svg",
    {
      viewBox: `0 0 ${width} ${height}`,
      role: "img",
      "aria-labelledby": titleId,
      class: `chart ${className}`,
      preserveAspectRatio: "none",
    },
    h("title", { id: titleId }, `${title}; highest ${format(max)}`),
    h("line", {
      x1: pad.left,
      x2: width - pad.right,
      y1: pad.top + plotHeight,
      y2: pad.top + plotHeight,
      class: "baseline",
    }),
    bars,
  );
  return figure(title, svg, `Highest: ${format(max)}`, labels, values, format);
}

/** Horizontal ranked bars: top contracts, top senders. */
export function rankChart({ title, labels, values, format = String, labelNode = (l) => l }) {
  const max = maxOf(values);
  const rows = labels.map((label, i) =>
    h(
      "li",
      {},
      h("span", { class: "rank-label" }, labelNode(label)),
      h(
        "span",
        { class: "rank-track", "aria-hidden": "true" },
        h("span", { class: "rank-bar", style: null, "data-share": ratio(values[i], max) }),
      ),
      h("span", { class: "rank-value" }, format(values[i])),
    ),
  );
  const list = h("ol", { class: "rank", "aria-label": title }, rows);
  sizeBars(list);
  return h(
    "figure",
    { class: "figure" },
    h("figcaption", {}, title),
    labels.length ? list : h("p", { class: "empty" }, "No data yet."),
  );
}

/** Shares of a whole as one stacked bar with a legend: success / reverted / expired / pending. */
export function shareChart({ title, parts }) {
  const total = parts.reduce((s, p) => s + BigInt(p.value), 0n);
  const titleId = uid("chart");
  let x = 0;
  const rects = parts.map((p) => {
    const w = total === 0n ? 0 : ratio(p.value, total) * 100;
    const rect = h(
      "rect",
      { x: `${x}%`, y: 0, width: `${w}%`, height: 24, class: `share share-${p.key}` },
      h("title", {}, `${p.label}: ${p.value}`),
    );
    x += w;
    return rect;
  });
  const svg = h(
    "svg",
    { role: "img", "aria-labelledby": titleId, class: "chart share-chart", height: 24, width: "100%" },
    h("title", { id: titleId }, `${title}: ${parts.map((p) => `${p.label} ${p.value}`).join(", ")}`),
    h("rect", { x: 0, y: 0, width: "100%", height: 24, class: "share-empty" }),
    rects,
  );
  const legend = h(
    "ul",
    { class: "legend" },
    parts.map((p) =>
      h(
        "li",
        {},
        h("span", { class: `swatch share-${p.key}`, "aria-hidden": "true" }),
        `${p.label}: `,
        h("strong", { "data-status": p.key }, String(p.value)),
      ),
    ),
  );
  return h("figure", { class: "figure" }, h("figcaption", {}, title), svg, legend);
}

function figure(title, svg, summary, labels, values, format) {
  const details = h(
    "details",
    {},
    h("summary", {}, "Data table"),
    table(
      title,
      ["Day", "Value"],
      labels.map((l, i) => [l, format(values[i])]),
    ),
  );
  return h(
    "figure",
    { class: "figure" },
    h("figcaption", {}, title, h("span", { class: "muted" }, ` — ${summary}`)),
    svg,
    details,
  );
}

/** Bar widths are set through CSSOM (style attributes would need 'unsafe-inline' in the CSP). */
function sizeBars(list) {
  for (const bar of list.querySelectorAll(".rank-bar")) {
    bar.style.width = `${Math.max(1, Number(bar.dataset.share) * 100)}%`;
  }
}
