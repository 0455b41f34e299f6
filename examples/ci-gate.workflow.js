// piflow: pi-subagents
// A host CI step gates a fix: run the checks on the host; when they fail, a worker fixes the code
// from the CI log, a reviewer checks the fix, and the checks run again under a new key.
// `args.ci` is your test command (default: ci.sh, a stand-in that fails until a fix has landed).
const command = (args && args.ci) || "sh ci.sh";
const check = (/** @type {string} */ key) => runs.host(key, { kind: "command", command, timeoutMs: 600000, role: "ci", output: `logs/${key}.log` })
  .then((result) => ({ ok: true, summary: result.stdout.trim() }), (error) => ({ ok: false, summary: error.message }));
const first = await check("ci");
if (first.ok) return { gated: true, fixed: false, ci: first.summary };
const fix = await runs.run("fix", {
  agent: "worker",
  task: ["The CI checks failed:", first.summary, "The full log is logs/ci.log. Fix the cause."].join("\n"),
});
const review = await runs.run("review-fix", { agent: "reviewer", task: `Review this fix:\n${fix.output}` });
const again = await check("ci-after-fix");
console.log("ci after fix:", again.summary);
return { gated: again.ok, fixed: true, fix: runs.ref(fix), review: review.output, ci: again.summary };
