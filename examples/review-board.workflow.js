// piflow: pi-subagents
// A lanes review board: each area gets a writer, a fix pass that continues the writer's session,
// and a reviewer that returns a structured verdict. A "blocked" verdict stops only its own lane.
const VERDICT = {
  type: "object",
  properties: { verdict: { enum: ["approved", "blocked"] }, notes: { type: "string" } },
  required: ["verdict"],
};
const areas = ["api", "ui"];
const board = await runs.lanes(areas.map((area) => ({
  key: area,
  stages: [
    { key: "write", agent: "worker", task: `Implement the ${area} part of the change.` },
    { key: "fix", resume: "previous", task: "Address lint and type errors in what you wrote." },
    { key: "review", agent: "reviewer", task: `Review the ${area} changes.`, outputSchema: VERDICT },
  ],
})));
const blocked = board.filter((lane) => lane.state === "blocked").map((lane) => `${lane.key} at ${lane.failedStage}`);
emit({ lanes: board.length, blocked: blocked.length });
return {
  ready: blocked.length === 0,
  blocked,
  board: board.map((lane) => ({ key: lane.key, state: lane.state, stages: lane.stages.map((s) => `${s.key}:${s.state}`) })),
};
