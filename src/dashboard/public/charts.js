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
 * A round step for about `count` ticks up to `max` (1, 2 or 5 times a power of ten), in BigInt so
 * that wei stay exact; the axis then runs from 0 to the first multiple of the step at or above max.
 */
export function ticksFor(max, count = 4) {
  const m = BigInt(max);
  if (m <= 0n) return [0n];
  const rough = (m + BigInt(count) - 1n) / BigInt(count);
  const base = 10n ** BigInt(rough.toString().length - 1);
  const step = [1n, 2n, 5n, 10n].map((k) => k * base).find((candidate) => candidate >= rough);
  const top = ((m + step - 1n) / step) * step;
  const ticks = [];
  for (let v = 0n; v <= top; v += step) ticks.push(v);
  return ticks;
}

/**
 * Per-day values, as bars (`kind: "bar"`) or as a line with a point per day (`kind: "line"`,
 * for running totals), on a y axis of a few round, labelled ticks with gridlines. `format` writes
 * the axis labels; `exact` (default `format`) writes each day's value in its tooltip and in the
 * data table. The figure has a text alternative: its title, and the table of every value. With
 * no value above zero it says there is no data instead of drawing an empty box.
 */
export function barChart({
  title,
  labels,
  values,
  format = String,
  exact = format,
  className = "",
  kind = "bar",
}) {
  const max = maxOf(values);
  if (max === 0n) return noDays(title, labels);
  const { width, height, pad, ticks, barWidth, plotHeight, yOf, titleId, centre, dayLabel } = dayFrame(
    labels,
    max,
  );
  const axis = yAxis(ticks, yOf, pad, width, format);
  const marks = labels.map((label, i) => {
    const y = yOf(values[i]);
    const mark =
      kind === "line"
        ? h("circle", { cx: centre(i).toFixed(1), cy: y.toFixed(1), r: 3, class: "point" })
        : h("rect", {
            x: (centre(i) - barWidth / 2).toFixed(1),
            y: y.toFixed(1),
            width: barWidth.toFixed(1),
            height: Math.max(pad.top + plotHeight - y, BigInt(values[i]) > 0n ? 1 : 0).toFixed(1),
            class: "bar",
          });
    return h(
      "g",
      { class: "mark", "data-day": label },
      mark,
      h("title", {}, `${label}: ${exact(values[i])}`),
      dayLabel(label, i),
    );
  });
  const line =
    kind === "line"
      ? h("polyline", {
          points: labels.map((_, i) => `${centre(i).toFixed(1)},${yOf(values[i]).toFixed(1)}`).join(" "),
          class: "line",
        })
      : null;
  const svg = h(
    "svg",
    {
      viewBox: `0 0 ${width} ${height}`,
      role: "img",
      "aria-labelledby": titleId,
      class: `chart ${className}`,
    },
    h("title", { id: titleId }, `${title}; highest ${exact(max)}`),
    axis,
    line,
    marks,
  );
  return figure(title, svg, `Highest: ${exact(max)}`, labels, values, exact);
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

/** The y axis: a gridline and a label per tick. */
function yAxis(ticks, yOf, pad, width, format) {
  return ticks.map((v) =>
    h(
      "g",
      { class: "tick" },
      h("line", {
        x1: pad.left,
        x2: width - pad.right,
        y1: yOf(v).toFixed(1),
        y2: yOf(v).toFixed(1),
        class: "grid",
      }),
      h(
        "text",
        { x: pad.left - 6, y: (yOf(v) + 4).toFixed(1), class: "axis", "text-anchor": "end" },
        format(v),
      ),
    ),
  );
}

/** Colours for the series of a stacked chart; a chart shows at most this many (the rest as one). */
/** What a per-day chart shows when every day is zero. */
function noDays(title, labels) {
  return h(
    "figure",
    { class: "figure", "data-empty": "" },
    h("figcaption", {}, title),
    h("p", { class: "empty chart-empty" }, `No data for these ${labels.length} days yet.`),
  );
}

/**
 * The geometry the per-day charts share: the plot area, the y scale up to the highest tick above
 * `max`, one slot per day with its bar width and centre, and every 7th or so day's label under it.
 */
function dayFrame(labels, max) {
  const width = 640;
  const height = 200;
  const pad = { top: 12, right: 8, bottom: 28, left: 72 };
  const ticks = ticksFor(max);
  const top = ticks[ticks.length - 1];
  const slot = (width - pad.left - pad.right) / Math.max(1, labels.length);
  const plotHeight = height - pad.top - pad.bottom;
  const centre = (i) => pad.left + i * slot + slot / 2;
  return {
    width,
    height,
    pad,
    ticks,
    plotHeight,
    centre,
    barWidth: Math.max(2, slot * 0.7),
    yOf: (v) => pad.top + plotHeight - ratio(v, top) * plotHeight,
    titleId: uid("chart"),
    dayLabel: (label, i) =>
      i % Math.ceil(labels.length / 7) === 0
        ? h(
            "text",
            { x: centre(i).toFixed(1), y: height - 8, class: "axis", "text-anchor": "middle" },
            label.slice(5),
          )
        : null,
  };
}

export const STACK_SERIES = 6;

/**
 * Per-day bars stacked by series (refusals per code), on the same axis as barChart, with a legend
 * and a data table of every day × series. `series` is [{key, label, values}], at most
 * STACK_SERIES of them (the caller folds the rest into one). With no value it says so.
 */
export function stackedChart({ title, labels, series }) {
  const totals = labels.map((_, i) => series.reduce((s, x) => s + BigInt(x.values[i]), 0n));
  const max = maxOf(totals);
  if (max === 0n) return noDays(title, labels);
  const { width, height, pad, ticks, barWidth, yOf, titleId, centre, dayLabel } = dayFrame(labels, max);
  const marks = labels.map((label, i) => {
    let below = 0n;
    const parts = series.map((s, k) => {
      const v = BigInt(s.values[i]);
      const y0 = yOf(below);
      below += v;
      const y1 = yOf(below);
      if (v === 0n) return null;
      return h("rect", {
        x: (centre(i) - barWidth / 2).toFixed(1),
        y: y1.toFixed(1),
        width: barWidth.toFixed(1),
        height: Math.max(y0 - y1, 1).toFixed(1),
        class: `series series-${k}`,
        "data-series": s.key,
      });
    });
    const words = series
      .filter((s) => BigInt(s.values[i]) > 0n)
      .map((s) => `${s.label} ${s.values[i]}`)
      .join(", ");
    return h(
      "g",
      { class: "mark", "data-day": label },
      parts,
      h("title", {}, `${label}: ${totals[i]}${words ? ` (${words})` : ""}`),
      dayLabel(label, i),
    );
  });
  const svg = h(
    "svg",
    { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-labelledby": titleId, class: "chart stacked" },
    h("title", { id: titleId }, `${title}; highest ${max} in a day`),
    yAxis(ticks, yOf, pad, width, String),
    marks,
  );
  const legend = h(
    "ul",
    { class: "legend" },
    series.map((s, k) =>
      h("li", {}, h("span", { class: `swatch series-${k}`, "aria-hidden": "true" }), s.label),
    ),
  );
  const details = h(
    "details",
    {},
    h("summary", {}, "Data table"),
    table(
      title,
      ["Day", ...series.map((s) => s.label), "Total"],
      labels.map((l, i) => [l, ...series.map((s) => String(s.values[i])), String(totals[i])]),
    ),
  );
  return h(
    "figure",
    { class: "figure" },
    h("figcaption", {}, title, h("span", { class: "muted" }, ` — Highest: ${max} in a day`)),
    svg,
    legend,
    details,
  );
}
