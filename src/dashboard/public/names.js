// Contract and function names from the ABIs the project uploaded (PUT /projects/:id/contracts/
// :address): the tables that show a target or a selector show a name where one is known, with
// the raw value kept in the title and for copying.
import { get, seg } from "./api.js";
import { h, hex } from "./ui.js";

export async function contractNames(projectId) {
  let list = [];
  try {
    list = await get(`/projects/${seg(projectId)}/contracts`);
  } catch {
    // Names are an aid: a page without them still shows every address and selector.
  }
  const byAddress = new Map(list.map((c) => [c.address.toLowerCase(), c]));
  const signatureOf = (address, selector) =>
    byAddress
      .get(String(address ?? "").toLowerCase())
      ?.functions.find((f) => f.selector === String(selector ?? "").toLowerCase())?.signature ?? null;
  return {
    list,
    /** The contract's name with its short address, or the address alone. */
    contract(address) {
      const name = byAddress.get(String(address ?? "").toLowerCase())?.name;
      return name
        ? h("span", { class: "named" }, h("span", { class: "name" }, name), " ", hex(address))
        : hex(address);
    },
    /** The function's signature (the selector in its title), or the selector alone. */
    fn(address, selector) {
      const signature = signatureOf(address, selector);
      return signature
        ? h("code", { title: selector, class: "signature" }, signature)
        : h("code", {}, selector);
    },
    /** Every named function, for the allowlist's picker. */
    functions() {
      return list.flatMap((c) => c.functions.map((f) => ({ ...f, address: c.address, contract: c.name })));
    },
  };
}
