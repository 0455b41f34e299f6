-- Handlers of the server's `piflow/*` notifications (sent because the client opts in with
-- initializationOptions.piflow.customNotifications): they update the run records and show
-- progress, prompts and outcomes.
local approvals = require("piflow.approvals")
local commands = require("piflow.commands")
local compat = require("piflow.compat")
local config = require("piflow.config")
local lenses = require("piflow.lenses")
local message = require("piflow.message")
local progress = require("piflow.progress")
local runs = require("piflow.runs")

local M = {}

local on = {}

on["piflow/runStarted"] = function(params)
  local run = runs.update({
    runId = params.runId,
    uri = params.uri,
    workflowName = params.workflowName,
    state = "running",
  })
  progress.report(run)
  lenses.refresh_uri(run.uri)
end

-- Runs whose full snapshot was asked for after a delta came for agents this client never saw.
local resyncing = {}

--- What the lenses of a run depend on: its state and its awaiting checkpoints.
local function lens_key(run)
  local names = {}
  for _, checkpoint in ipairs(run.checkpoints or {}) do
    table.insert(names, checkpoint.name)
  end
  return (run.state or "") .. "|" .. table.concat(names, ",")
end

on["piflow/runProgress"] = function(params)
  local before = runs.get(params.runId)
  local lenses_before = before and lens_key(before)
  local run = runs.update(params)
  if runs.agents(run.runId) then
    resyncing[run.runId] = nil
  elseif not resyncing[run.runId] then
    -- A delta for agents never seen whole (this editor missed messages): fetch the run, once.
    resyncing[run.runId] = true
    commands.show_run(run.runId)
  end
  approvals.sync(params)
  progress.report(run)
  -- Progress arrives up to ten times a second: lenses are fetched again only when they change.
  if lens_key(run) ~= lenses_before then
    lenses.refresh_uri(run.uri)
  end
end

on["piflow/checkpoint"] = function(params)
  local run = runs.update({ runId = params.runId, uri = params.uri, state = "awaiting_input" })
  lenses.refresh_uri(run.uri)
  approvals.add({
    kind = "checkpoint",
    runId = params.runId,
    name = params.name,
    prompt = params.prompt,
    context = params.context,
  }, true)
end

on["piflow/budgetApproval"] = function(params)
  approvals.add({
    kind = "budget",
    runId = params.runId,
    proposalId = params.proposalId,
    consumed = params.consumed,
    previous = params.previous,
    proposed = params.proposed,
  }, true)
end

on["piflow/runFinished"] = function(params)
  local run = runs.update(params)
  approvals.clear_run(run.runId)
  progress.finish(run.runId)
  lenses.refresh_uri(run.uri)
  -- The outcome is always shown, whatever the progress setting: it is the answer to the run.
  -- One line (see piflow.message); :PiflowRuns → Details has the whole result and each agent.
  local text = runs.describe(run)
  if run.state == "completed" then
    if run.result ~= nil then
      text = text .. "  Result: " .. message.compact_json(run.result, 500)
    end
    return message.notify(text)
  end
  if run.error then
    text = string.format("%s  %s", text, message.error_text(run.error))
  end
  -- A failure needs looking into; a stop (often the user's own) only needs noting.
  message.notify(text, run.state == "failed" and vim.log.levels.ERROR or vim.log.levels.WARN)
end

on["piflow/log"] = function(params)
  if config.get().show_logs then
    local run = runs.get(params.runId) or {}
    message.notify(string.format("[%s %s] %s", run.workflowName or "workflow", runs.short_id(params.runId),
      params.message))
  end
end

--- The client's handlers for every piflow/* notification.
function M.handlers()
  local handlers = {}
  for method, handle in pairs(on) do
    -- Neovim 0.7 calls notification handlers from the RPC read loop (a fast event, where most
    -- of the API is off limits); on the main loop they may do anything, in arrival order.
    handlers[method] = function(_, params)
      vim.schedule(function()
        handle(compat.without_nulls(params))
      end)
    end
  end
  return handlers
end

return M
