-- Checkpoints and budget proposals that wait for an answer: which are pending, asking them one
-- at a time with vim.ui.select({"Approve", "Reject"}) once the user is idle in normal mode (a
-- question must never catch keys typed for the buffer), and answering through piflow.respond.
local commands = require("piflow.commands")
local compat = require("piflow.compat")
local config = require("piflow.config")
local lenses = require("piflow.lenses")
local message = require("piflow.message")
local runs = require("piflow.runs")

local M = {}

-- key → item {kind = "checkpoint"|"budget", runId, name | proposalId, prompt, context, ...}
local pending = {}
-- keys of items still to be asked, oldest first; one question is open at a time.
local queue = {}
local asking = false

local function key(item)
  if item.kind == "checkpoint" then
    return item.runId .. "\n" .. item.name
  end
  return item.runId .. "\nproposal " .. item.proposalId
end

--- The text a prompt shows: what is asked, then its context.
function M.question(item)
  local run = runs.get(item.runId) or {}
  local who = string.format("%s (%s)", run.workflowName or "workflow", runs.short_id(item.runId))
  if item.kind == "checkpoint" then
    local text = string.format("%s checkpoint %s: %s", who, item.name, item.prompt or "")
    if item.context ~= nil then
      text = text .. "\nContext: " .. message.compact_json(item.context, 400)
    end
    return text
  end
  return string.format(
    "%s budget raise %s\nConsumed: %s\nPrevious limits: %s\nProposed limits: %s",
    who,
    item.proposalId,
    message.compact_json(item.consumed, 200),
    message.compact_json(item.previous, 200),
    message.compact_json(item.proposed, 200)
  )
end

function M.remove(item)
  pending[key(item)] = nil
end

function M.answer(item, approved)
  return commands.respond(item.runId, { name = item.name, proposalId = item.proposalId }, approved, function()
    M.remove(item)
    lenses.refresh_uri((runs.get(item.runId) or {}).uri)
  end)
end

-- When a key was last pressed (typed or fed), for telling idle from busy.
local last_key_at = compat.uv.now()
vim.on_key(function()
  last_key_at = compat.uv.now()
end, vim.api.nvim_create_namespace("piflow.approvals"))

--- Whether a question can be asked now: normal mode, not in the middle of a command (operator,
--- mapping, prompt), no key typed for approval_idle_ms and none waiting to be read.
function M.user_idle()
  local mode = vim.api.nvim_get_mode()
  if mode.mode ~= "n" or mode.blocking then
    return false
  end
  if compat.uv.now() - last_key_at < config.get().approval_idle_ms then
    return false
  end
  return vim.fn.getchar(1) == 0
end

local ask_next

-- Polls for idleness while questions wait; stopped while none does or one is open.
local idle_timer
local IDLE_POLL_MS = 200

local function wait_for_idle()
  if idle_timer then
    return
  end
  idle_timer = compat.uv.new_timer()
  idle_timer:start(IDLE_POLL_MS, IDLE_POLL_MS, vim.schedule_wrap(function()
    if idle_timer and (asking or #queue == 0 or M.user_idle()) then
      idle_timer:stop()
      idle_timer:close()
      idle_timer = nil
      ask_next()
    end
  end))
end

local function what(item)
  return item.name and ("checkpoint " .. item.name) or ("budget proposal " .. item.proposalId)
end

function ask_next()
  while not asking and #queue > 0 do
    if not M.user_idle() then
      return wait_for_idle()
    end
    local item = pending[table.remove(queue, 1)]
    -- Items answered elsewhere (a lens, the CLI) while queued are gone from `pending`.
    if item then
      asking = true
      vim.ui.select({ "Approve", "Reject" }, { prompt = M.question(item), kind = "piflow.approval" }, function(choice)
        asking = false
        if choice then
          M.answer(item, choice == "Approve")
        else
          message.notify(what(item) .. " left unanswered: :PiflowApprove or :PiflowReject")
        end
        vim.schedule(ask_next)
      end)
    end
  end
end

--- Records a pending item; `ask` asks it (once) when approvals are enabled: at once if the user
--- is idle, else after telling them it waits, when they next are.
function M.add(item, ask)
  local k = key(item)
  local known = pending[k]
  pending[k] = vim.tbl_extend("force", known or {}, item)
  if ask and config.get().approvals and not (known and known.asked) then
    pending[k].asked = true
    table.insert(queue, k)
    if vim.api.nvim_get_mode().mode ~= "n" then
      message.notify(what(item) .. " waits: :PiflowApprove or :PiflowReject")
    end
    ask_next()
  end
end

--- Brings the run's pending items in line with its latest snapshot: `checkpoints` are the ones
--- still awaiting, and a budget proposal can only wait while the run is budget_exhausted.
function M.sync(run)
  local awaiting = {}
  for _, checkpoint in ipairs(run.checkpoints or {}) do
    awaiting[checkpoint.name] = true
    M.add({
      kind = "checkpoint",
      runId = run.runId,
      name = checkpoint.name,
      prompt = checkpoint.prompt,
      context = checkpoint.context,
    }, false)
  end
  for k, item in pairs(pending) do
    if item.runId == run.runId then
      local gone = (item.kind == "checkpoint" and not awaiting[item.name])
        or (item.kind == "budget" and run.state ~= "budget_exhausted")
      if gone then
        pending[k] = nil
      end
    end
  end
end

function M.clear_run(run_id)
  for k, item in pairs(pending) do
    if item.runId == run_id then
      pending[k] = nil
    end
  end
end

--- Pending items, of one run when `run_id` is given.
function M.list(run_id)
  local list = {}
  for _, item in pairs(pending) do
    if not run_id or item.runId == run_id then
      table.insert(list, item)
    end
  end
  table.sort(list, function(a, b)
    return key(a) < key(b)
  end)
  return list
end

return M
