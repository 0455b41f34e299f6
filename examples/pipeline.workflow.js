export const meta = { name: "doc-pipeline", description: "Draft, check and polish documentation pages" };

// Every page goes through the same stages; pages run concurrently, stages in order.
phase("pages");
const polished = await pipeline("pages", { install: "docs/install.md", usage: "docs/usage.md" }, {
  draft: (path) =>
    agent(prompt("Draft the page {path} from the code it documents.", { path }), {
      model: "openai/gpt-5.1",
      tools: ["read", "grep"],
      label: "Draft",
    }),
  check: (draft) =>
    agent(prompt("List factual errors in this draft:\n{draft}", { draft }), {
      role: "reviewer",
      label: "Fact check",
    }),
  polish: (notes) =>
    agent(prompt("Apply these notes and polish the page:\n{notes}", { notes }), {
      model: "smart",
      thinking: "low",
      label: "Polish",
    }),
});

phase("index");
const index = await agent(
  prompt("Write an index page linking these pages: {names}", { names: Object.keys(polished).join(", ") }),
  { model: "fast" },
);
return { pages: polished, index };
