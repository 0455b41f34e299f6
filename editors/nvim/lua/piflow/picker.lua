-- Choosing runs and what to do with them (vim.ui.select, so telescope/fzf-lua/dressing pickers
-- apply), and the run details buffer.
local approvals = require("piflow.approvals")
local commands = require("piflow.commands")
local message = require("piflow.message")
local runs = require("piflow.runs")

local M = {}

--- Calls on_pick(run) with the one run of `list`, or the one the user picks among several.
function M.pick_run(list, prompt, on_pick)
  if #list == 0 then
    message.notify("no run to " .. prompt, vim.log.levels.WARN)
  elseif #list == 1 then
    on_pick(list[1])
  else
    vim.ui.select(list, {
      prompt = "piflow: run to " .. prompt,
      kind = "piflow.run",
      format_item = runs.describe,
    }, function(run)
      if run then
        on_pick(run)
      end
    end)
  end
end

--- The runs the server knows (of every open project) for which `filter(run)` holds.
function M.with_runs(filter, on_list)
  return commands.list_runs(nil, function(list)
    on_list(vim.tbl_filter(filter, list))
  end)
end

local function describe_item(item)
  if item.kind == "checkpoint" then
    return string.format("checkpoint %s: %s", item.name, item.prompt or "")
  end
  return "budget raise " .. runs.short_id(item.proposalId)
end

--- Calls on_pick(item) with the pending approval chosen among `items`.
function M.pick_approval(items, verb, on_pick)
  if #items == 0 then
    message.notify("nothing awaits an answer", vim.log.levels.WARN)
  elseif #items == 1 then
    on_pick(items[1])
  else
    vim.ui.select(items, {
      prompt = "piflow: " .. verb,
      kind = "piflow.pending",
      format_item = function(item)
        return string.format("%s  %s", runs.describe(runs.get(item.runId) or item), describe_item(item))
      end,
    }, function(item)
      if item then
        on_pick(item)
      end
    end)
  end
end

--- Pending approvals into on_items(items): the ones notifications announced, else those the
--- server reports for awaiting runs (e.g. raised before this editor started).
function M.with_approvals(run_id, on_items)
  local known = approvals.list(run_id)
  if #known > 0 then
    return on_items(known)
  end
  M.with_runs(function(run)
    return run.state == "awaiting_input" and (run_id == nil or run.runId == run_id)
  end, function(awaiting)
    local left = #awaiting
    if left == 0 then
      return on_items({})
    end
    for _, run in ipairs(awaiting) do
      commands.show_run(run.runId, function(snapshot)
        for _, checkpoint in ipairs(snapshot.checkpoints or {}) do
          if checkpoint.state == "awaiting" then
            approvals.add({
              kind = "checkpoint",
              runId = run.runId,
              name = checkpoint.name,
              prompt = checkpoint.prompt,
              context = checkpoint.context,
            }, false)
          end
        end
        left = left - 1
        if left == 0 then
          on_items(approvals.list(run_id))
        end
      end)
    end
  end)
end

local function line_of_agent(agent)
  local parts = { agent.label or agent.id, agent.state }
  if agent.model then
    table.insert(parts, "model=" .. agent.model)
  end
  if agent.role then
    table.insert(parts, "role=" .. agent.role)
  end
  table.insert(parts, string.format("attempts=%d", agent.attempts or 0))
  if (agent.tokens or 0) > 0 then
    table.insert(parts, string.format("%d tok", agent.tokens))
  end
  if (agent.costUsd or 0) > 0 then
    table.insert(parts, string.format("$%.4f", agent.costUsd))
  end
  local lines = { "  " .. table.concat(parts, " · ") }
  if agent.error then
    table.insert(lines, string.format("    error: %s: %s", agent.error.code, agent.error.message))
  elseif agent.activity then
    table.insert(lines, "    " .. agent.activity)
  end
  return lines
end

--- The lines of the details view of a showRun snapshot.
function M.details_lines(snapshot)
  local lines = {
    "Workflow: " .. (snapshot.workflowName or "workflow"),
    "Run: " .. snapshot.runId,
    "Status: " .. (snapshot.state or "unknown"),
    "Phase: " .. (snapshot.phase or "(none)"),
  }
  if snapshot.uri then
    table.insert(lines, "Script: " .. vim.uri_to_fname(snapshot.uri))
  end
  local counts = snapshot.agents or {}
  table.insert(lines, string.format("Agents: %d/%d settled · %d tok · $%.4f", counts.settled or 0,
    counts.total or 0, snapshot.tokens or 0, snapshot.costUsd or 0))
  local budget = snapshot.budget
  if type(budget) == "table" and type(budget.limits) == "table" and next(budget.limits) then
    table.insert(lines, "Budget:")
    local dimensions = vim.tbl_keys(budget.limits)
    table.sort(dimensions)
    for _, dimension in ipairs(dimensions) do
      local limit = budget.limits[dimension]
      table.insert(lines, string.format("  %s: %s used (soft %s, hard %s)", dimension,
        tostring((budget.usage or {})[dimension] or 0), tostring(limit.soft or "-"), tostring(limit.hard or "-")))
    end
  end
  if snapshot.error then
    table.insert(lines, string.format("Error: %s: %s", snapshot.error.code, snapshot.error.message))
  end
  if snapshot.result ~= nil then
    table.insert(lines, "Result: " .. message.compact_json(snapshot.result, 2000))
  end
  if snapshot.agentList and #snapshot.agentList > 0 then
    table.insert(lines, "Agents / ownership:")
    for _, agent in ipairs(snapshot.agentList) do
      vim.list_extend(lines, line_of_agent(agent))
    end
  end
  if snapshot.checkpoints and #snapshot.checkpoints > 0 then
    table.insert(lines, "Checkpoints:")
    for _, checkpoint in ipairs(snapshot.checkpoints) do
      table.insert(lines, string.format("  %s (%s): %s", checkpoint.name, checkpoint.state or "awaiting",
        checkpoint.prompt or ""))
    end
  end
  return lines
end

--- Opens the run's details in a scratch buffer (`q` closes it).
function M.show_details(run_id)
  commands.show_run(run_id, function(snapshot)
    local name = "piflow://run/" .. run_id
    local bufnr = vim.fn.bufnr(name)
    if bufnr == -1 then
      bufnr = vim.api.nvim_create_buf(false, true)
      vim.api.nvim_buf_set_name(bufnr, name)
      vim.bo[bufnr].bufhidden = "wipe"
      vim.api.nvim_buf_set_keymap(bufnr, "n", "q", "<cmd>close<cr>", { nowait = true, silent = true })
    end
    vim.bo[bufnr].modifiable = true
    -- Values such as a result or a prompt may hold newlines; each line must be one line.
    local lines = {}
    for _, line in ipairs(M.details_lines(snapshot)) do
      vim.list_extend(lines, vim.split(line, "\n", { plain = true }))
    end
    vim.api.nvim_buf_set_lines(bufnr, 0, -1, false, lines)
    vim.bo[bufnr].modifiable = false
    if vim.fn.bufwinid(bufnr) == -1 then
      vim.cmd("split")
      vim.api.nvim_win_set_buf(0, bufnr)
    end
  end)
end

--- What can be done with `run` now, as {label, action} pairs.
function M.actions(run)
  local actions = {
    { "Details", function()
      M.show_details(run.runId)
    end },
  }
  if run.uri then
    table.insert(actions, { "Open script", function()
      vim.cmd("edit " .. vim.fn.fnameescape(vim.uri_to_fname(run.uri)))
    end })
  end
  for _, item in ipairs(approvals.list(run.runId)) do
    table.insert(actions, { "Approve " .. describe_item(item), function()
      approvals.answer(item, true)
    end })
    table.insert(actions, { "Reject " .. describe_item(item), function()
      approvals.answer(item, false)
    end })
  end
  if runs.PAUSABLE[run.state] then
    table.insert(actions, { "Pause", function()
      commands.pause(run.runId)
    end })
  end
  if runs.RESUMABLE[run.state] then
    table.insert(actions, { "Resume", function()
      commands.resume(run.runId)
    end })
  end
  if not runs.TERMINAL[run.state] then
    table.insert(actions, { "Stop", function()
      commands.stop(run.runId)
    end })
  end
  return actions
end

--- :PiflowRuns: every run, then what to do with the chosen one.
function M.runs_menu()
  return commands.list_runs(nil, function(list)
    if #list == 0 then
      return message.notify("no runs yet")
    end
    vim.ui.select(list, { prompt = "piflow runs", kind = "piflow.run", format_item = runs.describe }, function(run)
      if not run then
        return
      end
      vim.ui.select(M.actions(run), {
        prompt = runs.describe(run),
        kind = "piflow.action",
        format_item = function(action)
          return action[1]
        end,
      }, function(action)
        if action then
          action[2]()
        end
      end)
    end)
  end)
end

return M
