// Organizations and their members. Who may invite and who may change a role is the API's
// decision (admins invite, owners change roles, an organization keeps an owner): the page offers
// every action to everyone and shows the API's answer.
import { get, patch, post, seg } from "./api.js";
import { parityTable } from "./page-parity.js";
import { announce, badge, errorBox, field, form, h, section, table, time } from "./ui.js";

const ROLES = ["owner", "admin", "developer", "viewer"];

export async function orgList() {
  const orgs = await get("/orgs");
  const slugify = (name) =>
    name
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, "-")
      .replace(/^-+|-+$/g, "")
      .slice(0, 48);
  const createForm = form(
    { class: "inline", "aria-label": "Create an organization" },
    [
      field("Name", { name: "name", required: true, maxlength: 128 }),
      field(
        "Slug",
        { name: "slug", required: true, pattern: "[a-z0-9\\-]{3,48}" },
        "3 to 48 lower-case letters, digits and dashes; used as the project owner.",
      ),
    ],
    "Create organization",
    async ({ name, slug }) => {
      const org = await post("/orgs", { name, slug: slug || slugify(name) });
      announce(`Organization ${org.name} created`);
      location.hash = `#/orgs/${org.id}`;
    },
  );
  // Suggest a slug from the name until the slug is edited by hand.
  const nameInput = createForm.querySelector('[name="name"]');
  const slugInput = createForm.querySelector('[name="slug"]');
  nameInput.addEventListener("input", () => {
    if (!slugInput.dataset.edited) slugInput.value = slugify(nameInput.value);
  });
  slugInput.addEventListener("input", () => {
    slugInput.dataset.edited = "true";
  });
  return h(
    "div",
    {},
    h("h1", { tabindex: "-1" }, "Organizations"),
    section(
      "Your organizations",
      table(
        "Organizations you belong to",
        ["Name", "Slug", "Your role", "Created"],
        orgs.map((o) => [
          h("a", { href: `#/orgs/${o.id}` }, o.name),
          h("code", {}, o.slug),
          badge(o.role, "role"),
          time(o.created_at),
        ]),
        "You belong to no organization yet: create one below.",
      ),
    ),
    section("Create an organization", createForm),
  );
}

export async function orgDetail(ctx) {
  const orgId = ctx.params[0];
  const orgs = await get("/orgs");
  const org = orgs.find((o) => String(o.id) === orgId || o.slug === orgId);
  const [members, parity] = await Promise.all([
    get(`/orgs/${seg(orgId)}/members`),
    get(`/orgs/${seg(orgId)}/funds/parity`).catch((err) => err),
  ]);
  const roleSelect = (name, current, label) =>
    h(
      "select",
      { name, "aria-label": label },
      ROLES.map((r) => h("option", { value: r, selected: r === current }, r)),
    );
  const rows = members.map((m) => {
    const errors = errorBox();
    const select = roleSelect("role", m.role, `Role of ${m.email}`);
    const save = h("button", { type: "button", class: "secondary small" }, "Change role");
    // The refusal was of the role chosen then: another choice makes it stale.
    select.addEventListener("change", () => errors.clear());
    save.addEventListener("click", async () => {
      errors.clear();
      save.disabled = true;
      try {
        const updated = await patch(`/orgs/${seg(orgId)}/members/${m.developer_id}`, { role: select.value });
        announce(`${updated.email} is now ${updated.role}`);
        ctx.refresh();
      } catch (err) {
        errors.show(err);
      } finally {
        save.disabled = false;
      }
    });
    return [
      m.email,
      badge(m.role, "role"),
      h("div", { class: "row-actions" }, select, save, errors.el),
      time(m.created_at),
    ];
  });
  const invite = form(
    { class: "inline", "aria-label": "Invite a member" },
    [
      field("Email", { name: "email", type: "email", required: true }),
      field("Role", {
        tag: "select",
        name: "role",
        options: ROLES.map((r) => h("option", { value: r, selected: r === "developer" }, r)),
      }),
    ],
    "Invite",
    async ({ email, role }) => {
      const member = await post(`/orgs/${seg(orgId)}/members`, { email, role });
      announce(`${member.email} is a member as ${member.role}`);
      ctx.refresh();
    },
  );
  const parityPart =
    parity instanceof Error
      ? (() => {
          const e = errorBox();
          e.show(parity);
          return e.el;
        })()
      : parityTable(parity, ctx.currency);
  return h(
    "div",
    {},
    h("p", { class: "crumbs" }, h("a", { href: "#/orgs" }, "Organizations"), " / ", org?.name ?? orgId),
    h("h1", { tabindex: "-1" }, org ? `${org.name}` : `Organization ${orgId}`),
    org ? h("p", {}, "Slug ", h("code", {}, org.slug), " · your role ", badge(org.role, "role")) : null,
    section(
      "Members",
      table("Members and their roles", ["Email", "Role", "Change role", "Since"], rows),
      invite,
    ),
    section("Funds parity of this organization's projects", parityPart),
  );
}
