// The projects of every organization the developer belongs to, and creating one.
import { get, post } from "./api.js";
import { announce, field, form, h, hex, money, section, table, time } from "./ui.js";

export async function render(ctx) {
  const [projects, orgs] = await Promise.all([get("/projects"), get("/orgs")]);
  const owners = orgs.filter((o) => o.role === "owner" || o.role === "admin");
  const create = form(
    { class: "inline", "aria-label": "Create a project" },
    [
      field(
        "Project id",
        { name: "id", required: true, pattern: "[a-z0-9_\\-]{3,64}" },
        "3 to 64 of a–z, 0–9, _ and -; used in API calls.",
      ),
      field("Name", { name: "name", required: true, maxlength: 128 }),
      field("Organization", {
        tag: "select",
        name: "owner",
        required: true,
        options: (owners.length ? owners : orgs).map((o) =>
          h("option", { value: o.slug }, `${o.name} (${o.slug})`),
        ),
      }),
    ],
    "Create project",
    async ({ id, name, owner }) => {
      const project = await post("/projects", { id, name, owner });
      announce(`Project ${project.name} created`);
      location.hash = `#/projects/${encodeURIComponent(project.id)}`;
    },
  );
  return h(
    "div",
    {},
    h("h1", { tabindex: "-1" }, "Projects"),
    section(
      "Your projects",
      table(
        "Projects of your organizations",
        ["Project", "Id", "Gas tank", "Deposit address", "Created"],
        projects.map((p) => [
          h("a", { href: `#/projects/${encodeURIComponent(p.id)}` }, p.name),
          h("code", {}, p.id),
          money(p.gas_tank_balance, ctx.currency),
          hex(p.deposit_address),
          time(p.created_at),
        ]),
        "No projects yet.",
      ),
    ),
    section(
      "Create a project",
      orgs.length
        ? create
        : h("p", {}, "Create an organization first: ", h("a", { href: "#/orgs" }, "Organizations"), "."),
    ),
  );
}
