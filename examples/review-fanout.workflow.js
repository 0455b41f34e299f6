export const meta = { name: "review-fanout", description: "Review a change from three angles and merge the findings" };

// Each reviewer returns structured findings; the schema keeps the merge step simple.
const findingsSchema = {
  type: "object",
  properties: {
    summary: { type: "string" },
    findings: {
      type: "array",
      items: {
        type: "object",
        properties: {
          file: { type: "string" },
          line: { type: "integer" },
          severity: { type: "string", enum: ["blocker", "major", "minor"] },
          note: { type: "string" },
        },
        required: ["file", "severity", "note"],
      },
    },
  },
  required: ["summary", "findings"],
};

phase("review");
const change = args?.change ?? "the current branch";
const reviews = await parallel("reviews", {
  security: () =>
    agent(prompt("Review {change} for security problems.", { change }), {
      role: "reviewer",
      label: "Security review",
      outputSchema: findingsSchema,
    }),
  correctness: () =>
    agent(prompt("Review {change} for correctness and missing tests.", { change }), {
      role: "reviewer",
      label: "Correctness review",
      outputSchema: findingsSchema,
      retries: 1,
    }),
  docs: () =>
    agent(prompt("Check that {change} updates the documentation it affects.", { change }), {
      role: "scout",
      label: "Docs check",
      outputSchema: findingsSchema,
    }),
});

phase("merge");
const all = Object.values(reviews).flatMap((review) => review.findings);
const blockers = all.filter((finding) => finding.severity === "blocker");
const summary = await agent(
  prompt("Write a short review summary for {change} from these findings:\n{all}", { change, all }),
  { model: "fast", label: "Summary", timeoutMs: 120000 },
);
return { summary, blockers: blockers.length, findings: all };
