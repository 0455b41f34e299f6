-- The :Piflow* user commands: argument parsing, completion, and a picker when an argument is left out.
local approvals = require("piflow.approvals")
local client = require("piflow.client")
local commands = require("piflow.commands")
local compat = require("piflow.compat")
local message = require("piflow.message")
local picker = require("piflow.picker")
local runs = require("piflow.runs")

local M = {}

local function decode_json(text, what)
  local ok, decoded = pcall(vim.json.decode, text)
  if not ok then
    message.notify(string.format("%s must be JSON: %s", what, decoded), vim.log.levels.ERROR)
    return nil, false
  end
  return decoded, true
end

-- A run id as typed (full or a prefix of a run this editor knows) → the full id.
local function run_id(text)
  local run = runs.resolve(text)
  return run and run.runId or text
end

--- `:PiflowPause [id]`-style commands: act on the run named, else on the one run (or the
--- chosen run) in a state that allows it.
local function run_command(verb, states, act)
  return function(opts)
    local id = opts.fargs[1]
    if id then
      return act(run_id(id), opts.fargs)
    end
    picker.with_runs(function(run)
      return states[run.state] ~= nil
    end, function(list)
      picker.pick_run(list, verb, function(run)
        act(run.runId, opts.fargs)
      end)
    end)
  end
end

local function respond_command(approved)
  return function(opts)
    local id, name = opts.fargs[1], opts.fargs[2]
    if id and name then
      id = run_id(id)
      -- A budget proposal is answered by its id; anything else names a checkpoint label.
      for _, item in ipairs(approvals.list(id)) do
        if item.kind == "budget" and item.proposalId:sub(1, #name) == name then
          return approvals.answer(item, approved)
        end
      end
      return approvals.answer({ kind = "checkpoint", runId = id, name = name }, approved)
    end
    picker.with_approvals(id and run_id(id), function(items)
      picker.pick_approval(items, approved and "approve" or "reject", function(item)
        approvals.answer(item, approved)
      end)
    end)
  end
end

-- Completion: ids (short) of known runs in `states`, then for approvals the pending names.
local function complete_ids(states)
  return function(arglead)
    local ids = {}
    for _, run in ipairs(runs.list(function(run)
      return states[run.state] ~= nil
    end)) do
      local short = runs.short_id(run.runId)
      if short:sub(1, #arglead) == arglead then
        table.insert(ids, short)
      end
    end
    return ids
  end
end

local function complete_approvals(arglead, cmdline)
  local words = vim.split(cmdline, "%s+", { trimempty = true })
  local typing_name = #words >= 3 or (#words == 2 and arglead == "")
  local candidates = {}
  for _, item in ipairs(approvals.list()) do
    local candidate
    if typing_name then
      local run = runs.resolve(words[2])
      if run and run.runId == item.runId then
        candidate = item.name or item.proposalId
      end
    else
      candidate = runs.short_id(item.runId)
    end
    if candidate and candidate:sub(1, #arglead) == arglead and not vim.tbl_contains(candidates, candidate) then
      table.insert(candidates, candidate)
    end
  end
  return candidates
end

local ACTIVE = {}
for _, state in ipairs(runs.ATTENTION) do
  if not runs.TERMINAL[state] then
    ACTIVE[state] = true
  end
end

-- name → {callback, options}
local definitions = {
  PiflowRun = {
    function(opts)
      local run_opts = {}
      if opts.args ~= "" then
        local args, ok = decode_json(opts.args, ":PiflowRun's argument")
        if not ok then
          return
        end
        run_opts.args = args
      end
      local bufnr = vim.api.nvim_get_current_buf()
      if #compat.get_clients(client.name, bufnr) == 0 then
        return message.notify("the current buffer is not a workflow script with piflow attached", vim.log.levels.ERROR)
      end
      commands.run(bufnr, run_opts)
    end,
    { nargs = "?", desc = "Run the current workflow script (optional JSON args)" },
  },
  PiflowRuns = {
    function()
      picker.runs_menu()
    end,
    { nargs = 0, desc = "Pick a piflow run, then an action" },
  },
  PiflowResume = {
    run_command("resume", runs.RESUMABLE, function(id, fargs)
      local budget, ok
      if fargs[2] then
        budget, ok = decode_json(table.concat(fargs, " ", 2), ":PiflowResume's budget patch")
        if not ok then
          return
        end
      end
      commands.resume(id, budget)
    end),
    { nargs = "*", complete = complete_ids(runs.RESUMABLE), desc = "Resume a run [id] [budget-patch-json]" },
  },
  PiflowPause = {
    run_command("pause", runs.PAUSABLE, commands.pause),
    { nargs = "?", complete = complete_ids(runs.PAUSABLE), desc = "Pause a run [id]" },
  },
  PiflowStop = {
    run_command("stop", ACTIVE, commands.stop),
    { nargs = "?", complete = complete_ids(ACTIVE), desc = "Stop a run [id]" },
  },
  PiflowApprove = {
    respond_command(true),
    { nargs = "*", complete = complete_approvals, desc = "Approve a checkpoint or budget raise [id [name]]" },
  },
  PiflowReject = {
    respond_command(false),
    { nargs = "*", complete = complete_approvals, desc = "Reject a checkpoint or budget raise [id [name]]" },
  },
}

function M.create()
  for name, definition in pairs(definitions) do
    vim.api.nvim_create_user_command(name, definition[1], definition[2])
  end
end

return M
