-- What the plugin knows about runs: one record per run id, fed by the server's notifications
-- and command results, read by the statusline, pickers and commands.
local compat = require("piflow.compat")

local M = {}

local by_id = {}

-- States in the order a user should look at them (the reference run picker's order).
M.ATTENTION = {
  "awaiting_input",
  "budget_exhausted",
  "running",
  "pausing",
  "paused",
  "interrupted",
  "failed",
  "queued",
  "stopped",
  "completed",
}
local rank = {}
for index, state in ipairs(M.ATTENTION) do
  rank[state] = index
end

M.TERMINAL = { completed = true, failed = true, stopped = true }
M.RESUMABLE = { paused = true, interrupted = true, budget_exhausted = true }
M.PAUSABLE = { running = true, awaiting_input = true }

local GLYPH = {
  awaiting_input = "●",
  budget_exhausted = "!",
  running = "⠦",
  pausing = "⠦",
  queued = "⠦",
  paused = "⏸",
  interrupted = "◆",
  failed = "✗",
  stopped = "■",
  completed = "✓",
}

local SETTLED = { completed = true, failed = true, cancelled = true }

--- The agent counts of a runProgress agent list, in the listRuns shape.
local function count_agents(list)
  local counts = { total = #list, settled = 0 }
  local cost = 0
  for _, agent in ipairs(list) do
    if SETTLED[agent.state] then
      counts.settled = counts.settled + 1
    end
    cost = cost + (tonumber(agent.costUsd) or 0)
  end
  return counts, cost
end

local function changed(run)
  compat.fire_user_event("PiflowRunChanged", run)
  vim.cmd("redrawstatus")
end

--- Merges `fields` (any of the protocol's run shapes: runStarted, runProgress, runFinished,
--- a listRuns summary, a showRun snapshot, a command result; nulls removed) into the run's record.
function M.update(fields)
  local id = fields.runId
  local run = by_id[id] or { runId = id }
  by_id[id] = run
  for key, v in pairs(fields) do
    run[key] = v
  end
  if type(fields.agents) == "table" and fields.agents.total == nil then
    -- runProgress lists the agents; keep the list and the counts the other shapes carry.
    run.agentList = fields.agents
    run.agents, run.costUsd = count_agents(fields.agents)
  end
  local usage = type(fields.budget) == "table" and fields.budget.usage
  if type(usage) == "table" then
    run.costUsd = tonumber(usage.costUsd) or run.costUsd
    run.tokens = tonumber(usage.tokens) or run.tokens
  end
  run.seen = compat.uv.now()
  changed(run)
  return run
end

function M.get(id)
  return by_id[id]
end

--- The known run whose id is `text` or starts with it (when only one does).
function M.resolve(text)
  if by_id[text] then
    return by_id[text]
  end
  local found
  for id, run in pairs(by_id) do
    if id:sub(1, #text) == text then
      if found then
        return nil
      end
      found = run
    end
  end
  return found
end

--- Known runs, most in need of attention first, then most recently updated.
function M.list(filter)
  local list = {}
  for _, run in pairs(by_id) do
    if not filter or filter(run) then
      table.insert(list, run)
    end
  end
  table.sort(list, function(a, b)
    local ra, rb = rank[a.state] or #M.ATTENTION + 1, rank[b.state] or #M.ATTENTION + 1
    if ra ~= rb then
      return ra < rb
    end
    return (a.seen or 0) > (b.seen or 0)
  end)
  return list
end

function M.short_id(id)
  return id:sub(1, 8)
end

--- One line for pickers and messages: `● name 1a2b3c4d  awaiting_input  review  1/2 agents  $0.0123`.
function M.describe(run)
  local parts = {
    string.format("%s %s %s", GLYPH[run.state] or "◆", run.workflowName or "workflow", M.short_id(run.runId)),
    run.state or "unknown",
  }
  if run.phase then
    table.insert(parts, run.phase)
  end
  if type(run.agents) == "table" and run.agents.total then
    table.insert(parts, string.format("%d/%d agents", run.agents.settled or 0, run.agents.total))
  end
  if run.costUsd and run.costUsd > 0 then
    table.insert(parts, string.format("$%.4f", run.costUsd))
  end
  return table.concat(parts, "  ")
end

--- `piflow: 1 running, 1 awaiting` for the active runs; "" when there are none.
function M.statusline()
  local counts = {}
  for _, run in pairs(by_id) do
    local label = ({
      running = "running",
      pausing = "running",
      queued = "running",
      awaiting_input = "awaiting",
      paused = "paused",
      budget_exhausted = "over budget",
      interrupted = "interrupted",
    })[run.state]
    if label then
      counts[label] = (counts[label] or 0) + 1
    end
  end
  local parts = {}
  for _, label in ipairs({ "running", "awaiting", "paused", "over budget", "interrupted" }) do
    if counts[label] then
      table.insert(parts, string.format("%d %s", counts[label], label))
    end
  end
  if #parts == 0 then
    return ""
  end
  return "piflow: " .. table.concat(parts, ", ")
end

return M
