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

--- `value` as JSON lines indented by two spaces per level (object keys sorted), or a string
--- as its own lines, each line prefixed with `indent`.
local function value_lines(value, indent)
  local is_list = vim.islist or vim.tbl_islist
  local lines = {}
  local function add(v, prefix, pad, suffix)
    if type(v) ~= "table" or next(v) == nil then
      local ok, encoded = pcall(vim.json.encode, v)
      table.insert(lines, pad .. prefix .. (ok and encoded or tostring(v)) .. suffix)
      return
    end
    local list = is_list(v)
    table.insert(lines, pad .. prefix .. (list and "[" or "{"))
    local keys = list and {} or vim.tbl_keys(v)
    if list then
      for i = 1, #v do
        keys[i] = i
      end
    else
      table.sort(keys, function(a, b)
        return tostring(a) < tostring(b)
      end)
    end
    for i, k in ipairs(keys) do
      add(v[k], list and "" or (vim.json.encode(tostring(k)) .. ": "), pad .. "  ", i < #keys and "," or "")
    end
    table.insert(lines, pad .. (list and "]" or "}") .. suffix)
  end
  if type(value) == "string" then
    for _, line in ipairs(vim.split(value, "\n", { plain = true })) do
      table.insert(lines, indent .. line)
    end
  else
    add(value, "", indent, "")
  end
  return lines
end

--- An agent's lines, indented two spaces more per `depth` (a child agent sits under its parent).
local function line_of_agent(agent, depth)
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
    table.insert(lines, "    error: " .. message.error_text(agent.error))
  elseif agent.activity then
    table.insert(lines, "    " .. agent.activity)
  end
  if agent.output ~= nil then
    table.insert(lines, "    output:")
    vim.list_extend(lines, value_lines(agent.output, "      "))
  elseif agent.outputPreview then
    table.insert(lines, "    output: " .. agent.outputPreview)
    if agent.outputTruncated then
      table.insert(lines, "    (too long to show here: <CR> on the agent's line opens it whole)")
    end
  end
  local attempts = agent.attemptList or {}
  -- One attempt that went as the agent did says nothing new; retries and failures do.
  if #attempts > 1 or (attempts[1] and attempts[1].error) then
    for _, attempt in ipairs(attempts) do
      local line = string.format("    attempt %d: %s", attempt.number or 0, attempt.state or "?")
      if attempt.error then
        line = string.format("%s: %s", line, message.error_text(attempt.error))
      end
      table.insert(lines, line)
    end
  end
  if agent.transcriptPath then
    table.insert(lines, "    transcript: " .. agent.transcriptPath)
  end
  local pad = string.rep("  ", depth or 0)
  for i, line in ipairs(lines) do
    lines[i] = pad .. line
  end
  return lines
end

--- Agents depth first with their depth: each child (spec J.5, `parentId`) right after its parent;
--- one whose parent is not listed stays at the top level.
local function agent_tree(agents)
  local known, children, roots = {}, {}, {}
  for _, agent in ipairs(agents) do
    known[agent.id] = true
  end
  for _, agent in ipairs(agents) do
    local parent = agent.parentId
    if type(parent) == "string" and known[parent] and parent ~= agent.id then
      children[parent] = children[parent] or {}
      table.insert(children[parent], agent)
    else
      table.insert(roots, agent)
    end
  end
  local ordered, seen = {}, {}
  local function visit(agent, depth)
    if seen[agent.id] then
      return
    end
    seen[agent.id] = true
    table.insert(ordered, { agent = agent, depth = depth })
    for _, child in ipairs(children[agent.id] or {}) do
      visit(child, depth + 1)
    end
  end
  for _, agent in ipairs(roots) do
    visit(agent, 0)
  end
  -- Agents in a parent cycle (a malformed record) reach no root: still listed, at the top level.
  for _, agent in ipairs(agents) do
    visit(agent, 0)
  end
  return ordered
end

--- The details view of a showRun snapshot: its lines, and for each line of an agent the agent's
--- id (so <CR> can open that agent).
function M.details(snapshot)
  local lines, owners = {}, {}
  -- Values such as a result, a prompt or an error may hold newlines; each line must be one line.
  local function add(text, agent_id)
    for _, line in ipairs(vim.split(text, "\n", { plain = true })) do
      table.insert(lines, line)
      owners[#lines] = agent_id
    end
  end
  add("Workflow: " .. (snapshot.workflowName or "workflow"))
  add("Run: " .. snapshot.runId)
  add("Status: " .. (snapshot.state or "unknown"))
  add("Phase: " .. (snapshot.phase or "(none)"))
  if snapshot.uri then
    add("Script: " .. vim.uri_to_fname(snapshot.uri))
  end
  local counts = snapshot.agents or {}
  add(string.format("Agents: %d/%d settled · %d tok · $%.4f", counts.settled or 0, counts.total or 0,
    snapshot.tokens or 0, snapshot.costUsd or 0))
  local budget = snapshot.budget
  if type(budget) == "table" and type(budget.limits) == "table" and next(budget.limits) then
    add("Budget:")
    local dimensions = vim.tbl_keys(budget.limits)
    table.sort(dimensions)
    for _, dimension in ipairs(dimensions) do
      local limit = budget.limits[dimension]
      add(string.format("  %s: %s used (soft %s, hard %s)", dimension,
        tostring((budget.usage or {})[dimension] or 0), tostring(limit.soft or "-"), tostring(limit.hard or "-")))
    end
  end
  if snapshot.error then
    add("Error: " .. message.error_text(snapshot.error))
  end
  if snapshot.result ~= nil then
    add("Result: " .. message.compact_json(snapshot.result, 2000))
  end
  if snapshot.agentList and #snapshot.agentList > 0 then
    add("Agent details (<CR> on an agent opens it):")
    for _, entry in ipairs(agent_tree(snapshot.agentList)) do
      for _, line in ipairs(line_of_agent(entry.agent, entry.depth)) do
        add(line, entry.agent.id)
      end
    end
  end
  -- A pi-subagents run's lane boards: showRun has them under `subagents`; a run record merged
  -- from runProgress has the live ones under `lanes`.
  local subagents = type(snapshot.subagents) == "table" and snapshot.subagents or {}
  local boards = subagents.lanes or snapshot.lanes
  if type(boards) == "table" and #boards > 0 then
    add("Lanes:")
    for _, board in ipairs(boards) do
      if #boards > 1 then
        add(string.format("  runs.lanes #%s", tostring(board.call)))
      end
      for _, lane in ipairs(board.lanes or {}) do
        local stages = {}
        for _, stage in ipairs(lane.stages or {}) do
          local words = tostring(stage.key) .. " " .. (stage.state or "pending")
          if stage.verdict then
            words = words .. " (verdict " .. stage.verdict .. ")"
          elseif stage.error and stage.state ~= "completed" and stage.state ~= "blocked" then
            words = words .. " (" .. stage.error .. ")"
          end
          table.insert(stages, words)
        end
        add(string.format("  %s %s: %s", tostring(lane.key), lane.state or "running", table.concat(stages, " -> ")))
      end
    end
  end
  if snapshot.checkpoints and #snapshot.checkpoints > 0 then
    add("Checkpoints:")
    for _, checkpoint in ipairs(snapshot.checkpoints) do
      add(string.format("  %s (%s): %s", checkpoint.name, checkpoint.state or "awaiting", checkpoint.prompt or ""))
    end
  end
  return lines, owners
end

--- Shows `lines` in the read-only scratch buffer `name` (`q` closes it), in a split unless a
--- window shows it already; returns the buffer.
local function show_scratch(name, lines)
  local bufnr = vim.fn.bufnr(name)
  if bufnr == -1 then
    bufnr = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(bufnr, name)
    vim.bo[bufnr].bufhidden = "wipe"
    vim.api.nvim_buf_set_keymap(bufnr, "n", "q", "<cmd>close<cr>", { nowait = true, silent = true })
  end
  vim.bo[bufnr].modifiable = true
  vim.api.nvim_buf_set_lines(bufnr, 0, -1, false, lines)
  vim.bo[bufnr].modifiable = false
  if vim.fn.bufwinid(bufnr) == -1 then
    vim.cmd("split")
    vim.api.nvim_win_set_buf(0, bufnr)
  end
  return bufnr
end

--- The lines of one agent of a showAgent answer: what the details show, with the output whole.
function M.agent_lines(run_id, agent)
  local lines = { "Run: " .. run_id, "Agent: " .. (agent.label or agent.id) .. " (" .. agent.id .. ")" }
  for _, line in ipairs(line_of_agent(agent)) do
    vim.list_extend(lines, vim.split(line, "\n", { plain = true }))
  end
  return lines
end

--- Opens one agent of a run, with its full output (piflow.showAgent).
function M.show_agent(run_id, agent_id)
  commands.show_agent(run_id, agent_id, function(agent)
    show_scratch(string.format("piflow://run/%s/agent/%s", run_id, agent_id), M.agent_lines(run_id, agent))
  end)
end

--- Opens the run's details in a scratch buffer (`q` closes it, <CR> on an agent opens it).
function M.show_details(run_id)
  commands.show_run(run_id, function(snapshot)
    local lines, owners = M.details(snapshot)
    local bufnr = show_scratch("piflow://run/" .. run_id, lines)
    vim.keymap.set("n", "<CR>", function()
      local agent_id = owners[vim.api.nvim_win_get_cursor(0)[1]]
      if agent_id then
        M.show_agent(run_id, agent_id)
      end
    end, { buffer = bufnr, nowait = true, silent = true, desc = "piflow: open the agent under the cursor" })
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
