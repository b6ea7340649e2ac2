// The API's schema refusals in the words of the form. The service answers a request that does not
// match a route's schema with a detail such as `body.targetContract must match pattern "^0x…$"`:
// exact for a script, but a person should read neither a regular expression nor `body.` paths.
// Pure (no DOM): node's tests import it as the browser does.

/** What each request field is called on the dashboard's forms. */
const LABELS = {
  targetContract: "Contract address",
  target: "Contract address",
  functionSelector: "Function selector",
  selector: "Function selector",
  sender: "Sender",
  senders: "Sender",
  user: "Sender",
  email: "Email",
  slug: "Slug",
  name: "Name",
  id: "Project id",
  owner: "Organization",
  role: "Role",
  rateLimit: "Rate limit",
  scopes: "Scopes",
  url: "URL",
  description: "Description",
  eventTypes: "Events",
  timeoutMs: "Timeout",
  failMode: "What to do when it does not answer",
  thresholdWei: "Alert threshold",
  dailyCap: "Daily cap",
  validityTtlSec: "Authorization TTL",
  sponsorIcon: "Sponsor icon URL",
  kind: "Kind",
  maxWei: "Limit",
  maxOperations: "Limit (operations)",
  window: "Window",
  windowSeconds: "Interval",
  startsAt: "Start",
  endsAt: "End",
  from: "From",
  to: "To",
  status: "Status",
  limit: "Page size",
  offset: "Page",
  fromBlock: "From block",
  chainId: "Chain",
};

const FORMATS = {
  "date-time": "a date and time",
  date: "a date",
  uri: "a URL",
  email: "an email address",
};

const TYPES = {
  integer: "a whole number",
  number: "a number",
  string: "text",
  boolean: "yes or no",
  array: "a list",
  object: "a set of fields",
};

const BOUNDS = { ">=": "at least", ">": "more than", "<=": "at most", "<": "less than" };

/** `body.senders[0]`-style location, then the schema's words. */
const SCHEMA_DETAIL =
  /^(?:body|querystring|params|headers|request)((?:[./][A-Za-z_$][\w$-]*|\[(?:\d+|…)\])*)…?(?:\s+(.*))?$/s;

/**
 * A detail for a person: a schema refusal rewritten in plain words ("Contract address must be 0x
 * followed by 40 hexadecimal characters"); any other detail (the API's own sentences) unchanged.
 */
export function plainDetail(detail) {
  const text = String(detail ?? "");
  const m = SCHEMA_DETAIL.exec(text);
  const rest = (m?.[2] ?? "").trim();
  // Only the schema's own phrases: a sentence of the API that happens to start with "request" stays.
  if (!m || !/^(must |is required$|has an unknown field)/.test(rest)) return text;
  if (rest.startsWith("has an unknown field"))
    return "The request carried a field the service does not accept.";
  const subject = subjectOf(m[1] ?? "");
  return rest === "is required" ? `${subject} is required.` : `${subject} ${plainRule(rest)}.`;
}

/** The last named step of the path, with a list index counted from 1: "Sender 2". */
function subjectOf(path) {
  const steps = path.split(/[./[\]]+/).filter(Boolean);
  let name = null;
  let index = null;
  for (const step of steps) {
    if (/^\d+$/.test(step)) index = Number(step) + 1;
    else if (step !== "…") {
      name = step;
      index = null;
    }
  }
  if (name === null) return "The request";
  const label = LABELS[name] ?? humanize(name);
  return index === null ? label : `${label} ${index}`;
}

/** "maxGasWei" -> "Max gas wei": better than nothing for a field the table does not know. */
function humanize(name) {
  const words = name
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .replace(/[_-]+/g, " ")
    .toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

function plainRule(rule) {
  const pattern = /^must match pattern "(.*)"$/s.exec(rule);
  if (pattern) {
    const hexDigits = /\{(\d+)\}/.exec(pattern[1] ?? "");
    if (hexDigits && /0x/.test(pattern[1] ?? "") && /a-f/i.test(pattern[1] ?? ""))
      return `must be 0x followed by ${hexDigits[1]} hexadecimal characters`;
    return "is not in the accepted format";
  }
  const format = /^must match format "(.*)"$/.exec(rule);
  if (format) return FORMATS[format[1]] ? `must be ${FORMATS[format[1]]}` : "is not in the accepted format";
  const bound = /^must be (>=|>|<=|<) (-?[\d.]+)$/.exec(rule);
  if (bound) return `must be ${BOUNDS[bound[1]]} ${bound[2]}`;
  const length = /^must NOT have (more|fewer) than (\d+) (characters|items)$/.exec(rule);
  if (length) return `must have ${length[1] === "more" ? "at most" : "at least"} ${length[2]} ${length[3]}`;
  const type = /^must be (\w+)$/.exec(rule);
  if (type && TYPES[type[1]]) return `must be ${TYPES[type[1]]}`;
  if (rule === "must be equal to one of the allowed values" || rule === "must match a schema in anyOf")
    return "must be one of the offered choices";
  return "is not valid";
}
