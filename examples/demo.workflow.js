export const meta = { name: "demo", description: "Scan a codebase in parallel, fix findings in a pipeline, ship after approval" };

// Runs end to end on the scripted backend: `scripts/demo` answers from examples/demo.fixtures.yaml.
phase("scan");
const areas = await parallel("scan", {
  api: () => agent("Scan the API layer for bugs.", { role: "scout", label: "scan api" }),
  ui: () => agent("Scan the UI layer for bugs.", { role: "scout", label: "scan ui" }),
  db: () => agent("Scan the database layer for bugs.", { role: "scout", label: "scan db" }),
});

phase("fix");
const fixes = await pipeline("fix", { api: areas.api, ui: areas.ui, db: areas.db }, {
  patch: (finding) => agent(prompt("Write a patch for: {finding}", { finding }), { label: "patch" }),
  review: (patch) =>
    agent(prompt("Review this patch: {patch}", { patch }), {
      role: "reviewer",
      label: "review",
      outputSchema: { type: "object", properties: { approved: { type: "boolean" } }, required: ["approved"] },
    }),
});

phase("ship");
const decision = await checkpoint({ name: "ship", prompt: "Ship the reviewed fixes?", context: { areas: Object.keys(fixes) } });
log(`Ship decision: ${decision}`);
return { decision, reviews: fixes };
