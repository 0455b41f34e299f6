// piflow: pi-subagents
// A pi-subagents workflowScript: fan out children with runs.all, then a follow-up run.
const [api, ui] = await runs.all([
  { key: "api-review", agent: "reviewer", task: "Review the API changes on this branch." },
  { key: "ui-review", agent: "reviewer", task: "Review the UI changes on this branch." },
]);
const summary = await runs.run("summary", {
  agent: "worker",
  task: ["Summarise these reviews:", api.output, ui.output].join("\n"),
});
return { summary: summary.output };
