-- The server's `piflow.*` commands (workspace/executeCommand with one JSON object argument),
-- each reporting its outcome and keeping the run records up to date.
local client = require("piflow.client")
local compat = require("piflow.compat")
local lenses = require("piflow.lenses")
local notify = require("piflow.message").notify
local runs = require("piflow.runs")

local M = {}

-- A command that fails with a workflow error carries it as `data` ({code, message}).
local function error_text(err)
  if type(err.data) == "table" and err.data.code then
    return string.format("%s: %s", err.data.code, err.data.message or err.message)
  end
  return err.message or tostring(err)
end

--- Executes `command` with `arguments`; calls on_result(result) when it succeeds and notifies
--- the error when it fails. Returns false when no piflow server is running.
function M.execute(command, arguments, on_result, bufnr)
  local lsp_client = client.get(bufnr)
  if not lsp_client then
    notify("the language server is not running (open a workflow script first)", vim.log.levels.ERROR)
    return false
  end
  -- An empty Lua table would be sent as the JSON array [], not the object the server expects.
  if next(arguments) == nil then
    arguments = vim.empty_dict()
  end
  local params = { command = command, arguments = { arguments } }
  compat.request(lsp_client, "workspace/executeCommand", params, vim.schedule_wrap(function(err, result)
    if err then
      notify(string.format("%s failed: %s", command, error_text(err)), vim.log.levels.ERROR)
    elseif on_result then
      on_result(compat.without_nulls(result))
    end
  end), bufnr)
  return true
end

--- Runs the script of `bufnr` (its unsaved text); `opts` may hold args, budget, concurrency,
--- backend and fixtures.
function M.run(bufnr, opts)
  local uri = vim.uri_from_bufnr(bufnr)
  local arguments = vim.tbl_extend("force", opts or {}, { uri = uri })
  return M.execute("piflow.run", arguments, function(result)
    -- piflow/runStarted announces the run and may have arrived first: keep what it said.
    local known = runs.get(result.runId) or {}
    runs.update({ runId = result.runId, uri = uri, state = known.state or "running" })
  end, bufnr)
end

-- uri → the args text last typed for that script, offered again next time.
local last_args = {}

--- Asks for the script's args (JSON) with vim.ui.input, then runs it with them.
function M.run_with_args(bufnr)
  local uri = vim.uri_from_bufnr(bufnr)
  vim.ui.input({ prompt = "piflow: args (JSON, empty for none): ", default = last_args[uri] or "" }, function(text)
    if text == nil then
      return
    end
    local opts = {}
    if vim.trim(text) ~= "" then
      local ok, args = pcall(vim.json.decode, text)
      if not ok then
        return notify("args must be JSON: " .. args, vim.log.levels.ERROR)
      end
      opts.args = args
    end
    last_args[uri] = text
    M.run(bufnr, opts)
  end)
end

--- Opens the location list of the errors of `bufnr` (shown in the current window).
function M.show_errors(bufnr)
  local errors = vim.diagnostic.get(bufnr, { severity = vim.diagnostic.severity.ERROR })
  if #errors == 0 then
    return notify("no errors left: run the script again")
  end
  vim.diagnostic.setloclist({
    severity = vim.diagnostic.severity.ERROR,
    open = true,
    title = "piflow: fix these errors before running",
  })
end

--- Lens commands the client answers itself: `▶ Run with args…` needs input the server cannot
--- ask for, so docs/protocol.md leaves `piflow.runWithArgs` to plugins.
M.client_side = {
  ["piflow.runWithArgs"] = function(_, context)
    M.run_with_args(context.bufnr)
  end,
  -- `▶ Run (fix N errors first)`: the errors in the location list, not a message cut to a line.
  ["piflow.showErrors"] = function(_, context)
    M.show_errors(context.bufnr)
  end,
}

local function after_state_change(run_id, result)
  local run = runs.update({ runId = run_id, state = result.state })
  lenses.refresh_uri(run.uri)
end

function M.resume(run_id, budget)
  return M.execute("piflow.resume", { runId = run_id, budget = budget }, function(result)
    after_state_change(run_id, result)
    if result.proposalId then
      -- The raise waits for approval; the server's piflow/budgetApproval prompts for it.
      notify(result.message or ("budget proposal " .. result.proposalId .. " awaits approval"))
    else
      notify(string.format("run %s %s", runs.short_id(run_id), result.state))
    end
  end)
end

function M.pause(run_id)
  return M.execute("piflow.pause", { runId = run_id }, function(result)
    after_state_change(run_id, result)
    notify(string.format("run %s %s", runs.short_id(run_id), result.state))
  end)
end

function M.stop(run_id)
  return M.execute("piflow.stop", { runId = run_id }, function(result)
    after_state_change(run_id, result)
    if result.stopped then
      notify(string.format("run %s stopped", runs.short_id(run_id)))
    else
      notify(string.format("run %s not stopped (%s)", runs.short_id(run_id), result.reason or result.state),
        vim.log.levels.WARN)
    end
  end)
end

--- Answers a checkpoint (`target.name`) or a budget proposal (`target.proposalId`).
function M.respond(run_id, target, approved, on_result)
  local arguments = { runId = run_id, name = target.name, proposalId = target.proposalId, approved = approved }
  return M.execute("piflow.respond", arguments, function(result)
    local what = target.name and ("checkpoint " .. target.name) or ("budget proposal " .. target.proposalId)
    if result.accepted == false or result.reason == "proposal_not_pending" then
      notify(string.format("%s of run %s was not waiting for an answer", what, runs.short_id(run_id)),
        vim.log.levels.WARN)
    else
      notify(string.format("%s %s", what, approved and "approved" or "rejected"))
    end
    if on_result then
      on_result(result)
    end
  end)
end

--- Lists the runs of `uri` (all runs of the open projects when nil) into on_list(runs).
function M.list_runs(uri, on_list)
  return M.execute("piflow.listRuns", { uri = uri }, function(result)
    local list = {}
    for _, summary in ipairs(result.runs or {}) do
      table.insert(list, runs.update(summary))
    end
    on_list(list)
  end)
end

--- The full snapshot of a run (merged into its record) into on_snapshot(snapshot), if given.
function M.show_run(run_id, on_snapshot)
  return M.execute("piflow.showRun", { runId = run_id }, function(snapshot)
    runs.update(snapshot)
    if on_snapshot then
      on_snapshot(snapshot)
    end
  end)
end

--- One agent of a run with its full output into on_agent(agent).
function M.show_agent(run_id, agent_id, on_agent)
  return M.execute("piflow.showAgent", { runId = run_id, agentId = agent_id }, on_agent)
end

return M
