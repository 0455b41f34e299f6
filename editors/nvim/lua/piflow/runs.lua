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

-- runId → the run's agents merged from progress: {list (order of first sight), index (id →
-- position), settled, cost}. Kept out of the run records, which go to every PiflowRunChanged
-- autocmd: a record stays small whatever the size of its run.
local agents_of = {}

--- Adds (sign 1) or removes (sign -1) one agent's share of the totals.
local function tally(merged, agent, sign)
  if SETTLED[agent.state] then
    merged.settled = merged.settled + sign
  end
  merged.cost = merged.cost + sign * (tonumber(agent.costUsd) or 0)
end

--- Merges the agents a message lists: `reset` replaces the run's list, otherwise they are upserted
--- by id, in O(listed agents). False when a delta comes for a run whose full list is unknown.
local function merge_agents(run_id, listed, reset)
  local merged = agents_of[run_id]
  if reset then
    merged = { list = {}, index = {}, settled = 0, cost = 0 }
    agents_of[run_id] = merged
  elseif not merged then
    return false
  end
  for _, agent in ipairs(listed) do
    local at = merged.index[agent.id]
    if at then
      tally(merged, merged.list[at], -1)
      merged.list[at] = agent
    else
      table.insert(merged.list, agent)
      merged.index[agent.id] = #merged.list
    end
    tally(merged, agent, 1)
  end
  return true
end

local function changed(run)
  compat.fire_user_event("PiflowRunChanged", run)
  vim.cmd("redrawstatus")
end

-- Fields of a message that are not copied into the run record as they are.
local MERGED = { agentList = true, agentCounts = true, reset = true }

--- Merges `fields` (any of the protocol's run shapes: runStarted, runProgress, runFinished,
--- a listRuns summary, a showRun snapshot, a command result; nulls removed) into the run's record.
function M.update(fields)
  local id = fields.runId
  local run = by_id[id] or { runId = id }
  by_id[id] = run
  -- runProgress lists agents under `agents`; showRun counts them there and lists them under `agentList`.
  local listed = fields.agentList
  if type(fields.agents) == "table" and fields.agents.total == nil then
    listed = fields.agents
  end
  for key, v in pairs(fields) do
    if not MERGED[key] and v ~= listed then
      run[key] = v
    end
  end
  if type(listed) == "table" then
    -- A missing `reset` is a full snapshot (older servers, showRun).
    local known = merge_agents(id, listed, fields.reset ~= false) and agents_of[id]
    if known then
      run.agents = { total = #known.list, settled = known.settled }
      run.costUsd = known.cost
    end
  end
  if type(fields.agentCounts) == "table" then
    run.agents = fields.agentCounts
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

--- The agents of a run as merged from its progress, in order of first sight; nil while no full
--- list of the run was seen.
function M.agents(id)
  local merged = agents_of[id]
  return merged and merged.list
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
  -- A pi-subagents run's live lane board (runProgress `lanes`): `lanes 1/2 complete, ui blocked`.
  if type(run.lanes) == "table" and #run.lanes > 0 then
    local total, complete, blocked = 0, 0, {}
    for _, board in ipairs(run.lanes) do
      for _, lane in ipairs(board.lanes or {}) do
        total = total + 1
        if lane.state == "complete" then
          complete = complete + 1
        elseif lane.state == "blocked" then
          table.insert(blocked, tostring(lane.key) .. " blocked")
        end
      end
    end
    local text = string.format("lanes %d/%d complete", complete, total)
    if #blocked > 0 then
      text = text .. ", " .. table.concat(blocked, ", ")
    end
    table.insert(parts, text)
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
