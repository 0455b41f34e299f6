export const meta = { name: "release", description: "Prepare a release in a worktree and ship it after approval" };

phase("prepare");
const version = args?.version ?? "next";
const notes = await withWorktree("release", async () => {
  await agent(prompt("Bump the version to {version} and update the changelog.", { version }), {
    model: "openai/gpt-5.1",
    tools: ["read", "edit", "bash"],
    label: "Bump version",
  });
  const testReport = await agent("Run the test suite and report failures.", { role: "scout", label: "Tests" });
  return agent(prompt("Write release notes from the changelog. Test report:\n{testReport}", { testReport }), {
    role: "reviewer",
    label: "Release notes",
  });
});

phase("approve");
const decision = await checkpoint({
  name: "ship",
  prompt: `Ship version ${version}?`,
  context: { version, notes },
});
if (decision !== "approved") {
  log(`Release ${version} was not approved.`);
  return { shipped: false, version };
}

phase("ship");
const shipped = await withWorktree("release", () =>
  agent(prompt("Tag and publish version {version}.", { version }), {
    model: "openai/gpt-5.1",
    tools: ["bash"],
    label: "Publish",
  }),
);
return { shipped: true, version, notes, log: shipped };
