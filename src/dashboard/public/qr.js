// A QR code as inline SVG, drawn from the module matrix of `uqr` (served by the service itself:
// no CDN), one path of unit squares.
import { encode } from "/dashboard/uqr.js";
import { h } from "./ui.js";

export function qrCode(text, label) {
  const { data, size } = encode(text, { ecc: "M", border: 2 });
  let d = "";
  for (let y = 0; y < size; y++) {
    for (let x = 0; x < size; x++) if (data[y][x]) d += `M${x} ${y}h1v1h-1z`;
  }
  return h(
    "svg",
    {
      viewBox: `0 0 ${size} ${size}`,
      class: "qr",
      role: "img",
      "aria-label": label,
      "shape-rendering": "crispEdges",
    },
    h("rect", { width: size, height: size, class: "qr-bg" }),
    h("path", { d, class: "qr-fg" }),
  );
}
