-- Runs one scenario of tests/editors/test_nvim.py inside a headless Neovim (0.7.2 to 0.12) and
-- writes what it observed to a JSON file; the Python side asserts on it.
--
-- The spec file named by $PIFLOW_NVIM_SPEC holds {plugin, scenario, output, ...scenario data}.
local spec_file = assert(io.open(assert(os.getenv("PIFLOW_NVIM_SPEC")), "r"))
-- JSON nulls stay vim.NIL, as some Neovims deliver them from the server.
local spec = vim.json.decode(spec_file:read("*a"))
spec_file:close()

vim.opt.runtimepath:prepend(spec.plugin)
vim.o.shortmess = vim.o.shortmess .. "F"

local out = { notifications = {}, selects = {} }

-- Every message the plugin shows, in order, with its level.
vim.notify = function(msg, level)
  table.insert(out.notifications, { message = msg, level = level or vim.log.levels.INFO })
end

-- vim.ui.select answers come from a queue of choosers: chooser(items, labels, opts) → item.
local choosers = {}
-- Answers selects when the queue is empty.
local default_chooser
local function answer_next(chooser)
  table.insert(choosers, chooser)
end
local function choose_label(label)
  return function(items, labels)
    for index, text in ipairs(labels) do
      if text == label or text:find(label, 1, true) == 1 then
        return items[index]
      end
    end
    error(string.format("no choice %q among %s", label, vim.inspect(labels)))
  end
end
vim.ui.select = function(items, opts, on_choice)
  local labels = {}
  for _, item in ipairs(items) do
    table.insert(labels, opts.format_item and opts.format_item(item) or tostring(item))
  end
  table.insert(out.selects, { prompt = opts.prompt, kind = opts.kind, labels = labels })
  local chooser = table.remove(choosers, 1) or default_chooser
  -- Like a real picker, the answer comes later, from the event loop.
  vim.schedule(function()
    local item, index = nil, nil
    if chooser then
      item = chooser(items, labels, opts)
      for i, candidate in ipairs(items) do
        if candidate == item then
          index = i
        end
      end
    end
    on_choice(item, index)
  end)
end

-- vim.ui.input answers with the next text of this queue (nil: the user cancelled).
local inputs = {}
vim.ui.input = function(opts, on_confirm)
  out.inputs = out.inputs or {}
  table.insert(out.inputs, { prompt = opts.prompt, default = opts.default })
  local text = table.remove(inputs, 1)
  vim.schedule(function()
    on_confirm(text)
  end)
end

local function wait_for(what, timeout_ms, condition)
  if not vim.wait(timeout_ms, condition, 20) then
    error("timed out after " .. timeout_ms .. " ms waiting for " .. what, 2)
  end
end

local function messages_matching(pattern)
  local found = {}
  for _, n in ipairs(out.notifications) do
    if n.message:find(pattern) then
      table.insert(found, n)
    end
  end
  return found
end

-- Whether piflow/runFinished was shown for the run (a progress snapshot can report the final
-- state a moment before it, without the result).
local function announced_outcome(run_id)
  for _, n in ipairs(out.notifications) do
    local glyph = n.message:match("^piflow: (%S+) %S+ " .. vim.pesc(run_id:sub(1, 8)))
    if glyph == "✓" or glyph == "✗" or glyph == "■" then
      return true
    end
  end
  return false
end

local function health_lines()
  vim.cmd("checkhealth piflow")
  local lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  vim.cmd("bwipeout!")
  return lines
end

-- Code lenses of a buffer (0.12 releases wrap each lens and take a filter).
local function lenses_of(bufnr)
  if vim.lsp.codelens.enable then
    local lenses = {}
    for _, item in ipairs(vim.lsp.codelens.get({ bufnr = bufnr })) do
      table.insert(lenses, item.lens)
    end
    return lenses
  end
  return vim.lsp.codelens.get(bufnr)
end

local scenarios = {}

-- The server end of workspace/executeCommand: records each command with its argument as sent
-- (JSON) in the list it returns, and answers from `results`.
local function stub_server(results)
  local calls = {}
  require("piflow.client").get = function()
    return { name = "piflow" }
  end
  require("piflow.compat").request = function(_, method, params, handler)
    assert(method == "workspace/executeCommand")
    table.insert(calls, { command = params.command, arguments = vim.json.encode(params.arguments[1]) })
    vim.schedule(function()
      handler(nil, results[params.command] or vim.empty_dict())
    end)
  end
  return calls
end

-- send(method, params, keep_going): delivers a notification as the client would, then lets the
-- event loop run for a moment (unless keep_going).
local function notifier()
  local handlers = require("piflow.notifications").handlers()
  return function(method, params, keep_going)
    handlers[method](nil, params, { method = method, client_id = 1 })
    if not keep_going then
      vim.wait(50, function()
        return false
      end)
    end
  end
end

-- The plugin's own logic with the server's commands stubbed: notifications → records,
-- statusline, prompts, commands and their arguments.
function scenarios.unit()
  -- A script opened before setup() (as with a lazily loaded plugin) is detected again by it.
  vim.cmd("edit " .. spec.dir .. "/flow.workflow.js")
  out.filetype_before_setup = vim.bo.filetype
  local piflow = require("piflow")
  local ok, err = pcall(piflow.setup, { bogus = true })
  out.unknown_option = { ok = ok, err = err }
  ok, err = pcall(piflow.setup, { progress = "loud" })
  out.bad_choice = { ok = ok, err = err }
  ok, err = pcall(piflow.setup, { filetype = "javascript.piflow" })
  out.removed_option = { ok = ok, err = err }
  -- approval_idle_ms = 0: questions are asked at once when Neovim is in normal mode (the
  -- typing scenario tests the wait).
  piflow.setup({ cmd = { "piflow-not-installed-for-this-test", "serve" }, progress = "notify", approval_idle_ms = 0 })

  local results = {
    ["piflow.respond"] = { state = "running", approved = true, reason = "checkpoint", accepted = true },
    ["piflow.stop"] = { runId = "run-two-abcdef", state = "stopped", stopped = true },
    ["piflow.resume"] = { runId = "run-two-abcdef", state = "running" },
    ["piflow.listRuns"] = { runs = {} },
    ["piflow.showRun"] = spec.snapshot,
    ["piflow.showAgent"] = spec.agent,
  }
  local calls = stub_server(results)
  out.calls = calls
  local send = notifier()

  out.workflow_filetype = vim.bo.filetype
  local script_uri = vim.uri_from_bufnr(0)
  vim.cmd("edit " .. spec.dir .. "/plain.js")
  out.plain_filetype = vim.bo.filetype

  out.statusline_idle = piflow.statusline()
  send("piflow/runStarted", { runId = "run-one-0123456789", uri = script_uri, workflowName = "review" })
  out.statusline_started = piflow.statusline()

  local progress = {
    runId = "run-one-0123456789",
    uri = script_uri,
    state = "awaiting_input",
    phase = "review",
    agents = {
      { id = "a1", label = "draft", state = "completed", attempts = 1, tokens = 10, costUsd = 0.01 },
      { id = "a2", label = "check", state = "running", attempts = 1, tokens = 0, costUsd = 0 },
    },
    budget = { limits = {}, usage = { tokens = 10, costUsd = 0.01, durationMs = 5, agentLaunches = 2 }, events = {} },
    checkpoints = { { name = "ship", prompt = "Ship it?", context = { draft = "v1" } } },
  }
  send("piflow/runProgress", progress)
  out.statusline_awaiting = piflow.statusline()
  out.selects_after_progress = #out.selects

  -- The checkpoint notification prompts (once, even if repeated while it is pending) and answers
  -- through piflow.respond.
  answer_next(choose_label("Approve"))
  send("piflow/checkpoint", { runId = "run-one-0123456789", uri = script_uri, name = "ship", prompt = "Ship it?",
    context = { draft = "v1" } }, true)
  send("piflow/checkpoint", { runId = "run-one-0123456789", uri = script_uri, name = "ship", prompt = "Ship it?",
    context = { draft = "v1" } })
  wait_for("the checkpoint answer", 2000, function()
    return #calls >= 1
  end)
  out.selects_after_checkpoint = #out.selects

  -- Throttling: same state and phase, more agents settled, within the interval → one message.
  local before = #messages_matching("review run%-one")
  for settled = 1, 5 do
    progress.checkpoints = {}
    progress.state = "running"
    progress.agents[2].state = settled == 5 and "completed" or "running"
    send("piflow/runProgress", progress)
  end
  out.progress_messages = #messages_matching("review run%-one") - before

  -- A budget proposal for a second run: prompted, rejected by proposal id.
  send("piflow/runStarted", { runId = "run-two-abcdef", uri = script_uri, workflowName = "costly" })
  send("piflow/runProgress", { runId = "run-two-abcdef", uri = script_uri, state = "budget_exhausted", phase = vim.NIL,
    agents = {}, budget = { limits = {}, usage = {}, events = {} }, checkpoints = {} })
  out.statusline_two = piflow.statusline()
  answer_next(choose_label("Reject"))
  send("piflow/budgetApproval", { runId = "run-two-abcdef", proposalId = "prop-1234", consumed = { tokens = 100 },
    previous = { tokens = { hard = 100 } }, proposed = { tokens = { hard = 200 } } })
  wait_for("the budget answer", 2000, function()
    return #calls >= 2
  end)

  out.complete_stop = vim.fn.getcompletion("PiflowStop run-", "cmdline")
  out.complete_resume = vim.fn.getcompletion("PiflowResume ", "cmdline")

  -- Commands with explicit ids (a prefix resolves to the known run).
  vim.cmd("PiflowApprove run-one ship#2")
  vim.cmd("PiflowStop run-two")
  vim.cmd("PiflowResume run-two {\"tokens\": {\"hard\": 500}}")
  vim.cmd("PiflowRun {not json}")
  vim.cmd("PiflowRun")
  wait_for("the commands", 2000, function()
    return #calls >= 5
  end)

  -- Outcomes.
  send("piflow/runFinished", { runId = "run-one-0123456789", uri = script_uri, state = "completed",
    result = { shipped = true } })
  send("piflow/runFinished", { runId = "run-two-abcdef", uri = script_uri, state = "failed",
    error = { code = "BUDGET_EXHAUSTED", message = "Token budget exhausted" } })
  send("piflow/log", { runId = "run-one-0123456789", message = "hello from log()" })
  out.statusline_done = piflow.statusline()

  -- :PiflowRuns → the run → its actions → Details (a showRun snapshot in a scratch buffer).
  results["piflow.listRuns"] = { runs = { spec.summary } }
  answer_next(choose_label("✓ review"))
  answer_next(choose_label("Details"))
  vim.cmd("PiflowRuns")
  wait_for("the details buffer", 2000, function()
    return vim.fn.bufnr("piflow://run/" .. spec.summary.runId) ~= -1
  end)
  out.details = vim.api.nvim_buf_get_lines(vim.fn.bufnr("piflow://run/" .. spec.summary.runId), 0, -1, false)

  -- <CR> on the line of an agent whose output was too long for showRun opens it whole.
  for index, line in ipairs(out.details) do
    if line:find("too long to show here", 1, true) then
      vim.api.nvim_win_set_cursor(0, { index, 0 })
    end
  end
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("<CR>", true, false, true), "x", false)
  local agent_buffer = "piflow://run/" .. spec.summary.runId .. "/agent/a2"
  wait_for("the agent's buffer", 2000, function()
    return vim.fn.bufnr(agent_buffer) ~= -1
  end)
  out.agent_view = vim.api.nvim_buf_get_lines(vim.fn.bufnr(agent_buffer), 0, -1, false)
  vim.cmd("close")
  vim.cmd("close")

  -- `▶ Run (fix N errors first)` runs client-side: the buffer's errors go to the location list.
  vim.cmd("edit " .. spec.dir .. "/flow.workflow.js")
  local flow = vim.api.nvim_get_current_buf()
  local ns = vim.api.nvim_create_namespace("piflow-test")
  vim.diagnostic.set(ns, flow, {
    { lnum = 1, col = 0, message = "UNKNOWN_MODEL: Unknown model gpt-9", severity = vim.diagnostic.severity.ERROR },
    { lnum = 0, col = 0, message = "only a hint", severity = vim.diagnostic.severity.HINT },
  })
  require("piflow.commands").client_side["piflow.showErrors"]({ command = "piflow.showErrors" }, { bufnr = flow })
  out.show_errors = {}
  for _, item in ipairs(vim.fn.getloclist(0)) do
    table.insert(out.show_errors, { lnum = item.lnum, text = item.text })
  end
  out.show_errors_window = vim.bo.buftype
  vim.cmd("lclose")

  -- One line that fits the echo area, whatever Neovim's own vim.notify would have to show.
  local message = require("piflow.message")
  out.fitted = message.fit("✓ review 1a2b3c4d  completed\nResult: " .. string.rep("x", 100), 50)
  out.fitted_width = vim.fn.strdisplaywidth(out.fitted)

  out.health = health_lines()
end

-- The real `piflow serve`: diagnostics, code lenses, a run launched from its lens, its
-- checkpoint answered through vim.ui.select, its completion, and :checkhealth.
function scenarios.server()
  local piflow = require("piflow")
  piflow.setup({ cmd = spec.cmd, progress = "notify", approval_idle_ms = 0 })

  vim.cmd("edit " .. spec.dir .. "/broken.workflow.js")
  local broken = vim.api.nvim_get_current_buf()
  wait_for("diagnostics of broken.workflow.js", 20000, function()
    return #vim.diagnostic.get(broken) > 0
  end)
  out.diagnostics = {}
  for _, d in ipairs(vim.diagnostic.get(broken)) do
    table.insert(out.diagnostics, { lnum = d.lnum, col = d.col, message = d.message, code = d.code,
      severity = d.severity, source = d.source })
  end

  vim.cmd("edit " .. spec.dir .. "/review.workflow.js")
  local script = vim.api.nvim_get_current_buf()
  local function lens_titles()
    local titles = {}
    for _, lens in ipairs(lenses_of(script)) do
      if lens.command then
        table.insert(titles, lens.command.title)
      end
    end
    table.sort(titles)
    return titles
  end
  wait_for("code lenses", 20000, function()
    return #lens_titles() > 0
  end)
  out.lenses = lens_titles()

  -- Run through the lens: move to its line and run it like a user would (several lenses share
  -- the line, so Neovim asks which one).
  for _, lens in ipairs(lenses_of(script)) do
    if lens.command and lens.command.title == "▶ Run" then
      vim.api.nvim_win_set_cursor(0, { lens.range.start.line + 1, 0 })
    end
  end
  default_chooser = function(items, labels)
    for _, wanted in ipairs({ "▶ Run", "Approve" }) do
      if vim.tbl_contains(labels, wanted) then
        return choose_label(wanted)(items, labels)
      end
    end
  end
  vim.lsp.codelens.run()

  local runs = require("piflow.runs")
  wait_for("the run to start", 20000, function()
    return #runs.list() > 0
  end)
  out.statusline_running = piflow.statusline()
  local run_id = runs.list()[1].runId
  out.run_id = run_id
  wait_for("the run to finish", 30000, function()
    return announced_outcome(run_id)
  end)
  local run = runs.get(run_id)
  out.finished = { state = run.state, result = run.result, error = run.error, workflowName = run.workflowName }
  out.statusline_done = piflow.statusline()

  local listed
  require("piflow.commands").list_runs(vim.uri_from_bufnr(script), function(list)
    listed = list
  end)
  wait_for("piflow.listRuns", 10000, function()
    return listed ~= nil
  end)
  out.listed = {}
  for _, r in ipairs(listed) do
    table.insert(out.listed, { runId = r.runId, state = r.state, workflowName = r.workflowName })
  end

  -- :PiflowRuns lists every run of the open projects; its Details action shows the snapshot.
  answer_next(choose_label("✓ review"))
  answer_next(choose_label("Details"))
  vim.cmd("PiflowRuns")
  local details = "piflow://run/" .. run_id
  wait_for("the run's details", 10000, function()
    return vim.fn.bufnr(details) ~= -1
  end)
  out.details = vim.api.nvim_buf_get_lines(vim.fn.bufnr(details), 0, -1, false)
  vim.cmd("close")

  wait_for("lenses after the run", 10000, function()
    local titles = lens_titles()
    return #titles > 0 and not vim.tbl_contains(titles, "⏸ Pause")
  end)
  out.lenses_after = lens_titles()

  -- A second run through `▶ Run with args…` (the plugin asks for the JSON); its checkpoint
  -- question is dismissed, so the run waits: the statusline and the lenses show it, and
  -- :PiflowReject answers it.
  table.insert(inputs, '{"topic": "lakes"}')
  default_chooser = function(items, labels)
    if vim.tbl_contains(labels, "▶ Run with args…") then
      return choose_label("▶ Run with args…")(items, labels)
    end
  end
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  vim.lsp.codelens.run()
  local second
  wait_for("the second run to await its checkpoint", 20000, function()
    for _, r in ipairs(runs.list()) do
      if r.runId ~= run_id and r.state == "awaiting_input" then
        second = r
        return true
      end
    end
  end)
  wait_for("the Approve lens", 10000, function()
    return vim.tbl_contains(lens_titles(), "✓ Approve")
  end)
  out.awaiting = { statusline = piflow.statusline(), lenses = lens_titles() }
  for _, lens in ipairs(lenses_of(script)) do
    if lens.command and lens.command.title == "✓ Approve" then
      out.awaiting.approve_line = lens.range.start.line
    end
  end
  vim.cmd("PiflowReject")
  wait_for("the second run to finish", 20000, function()
    return announced_outcome(second.runId)
  end)
  out.second = { state = runs.get(second.runId).state, result = runs.get(second.runId).result }
  out.health = health_lines()
end

-- Progress deltas (issue 9): a reset lists every agent, a delta only the changed ones, merged by
-- id in O(changed agents); a delta for a run never seen whole fetches piflow.showRun once.
function scenarios.deltas()
  local piflow = require("piflow")
  piflow.setup({ cmd = { "piflow-not-installed-for-this-test", "serve" }, progress = "notify", approval_idle_ms = 0 })
  local calls = stub_server({ ["piflow.showRun"] = spec.snapshot })
  out.calls = calls
  local send = notifier()
  local runs = require("piflow.runs")
  local lenses = require("piflow.lenses")
  local lens_refreshes = 0
  local refresh_uri = lenses.refresh_uri
  lenses.refresh_uri = function(uri)
    lens_refreshes = lens_refreshes + 1
    return refresh_uri(uri)
  end
  local function ids(run_id)
    local list = {}
    for _, agent in ipairs(runs.agents(run_id) or {}) do
      table.insert(list, agent.id .. ":" .. agent.state)
    end
    return list
  end
  local function agent(id, state)
    return { id = id, label = id, state = state, attempts = 1, tokens = 0, costUsd = 0.001 }
  end
  local function delta(run_id, state, agents, counts, reset)
    return { runId = run_id, workflowName = "fan", state = state, agents = agents,
      agentCounts = counts, reset = reset, budget = { limits = {}, usage = {}, events = {} }, checkpoints = {} }
  end

  -- A delta before any full list: its counts show, one showRun fetches the whole run.
  local gap = spec.snapshot.runId
  send("piflow/runProgress", delta(gap, "running", { agent("a2", "failed") }, { total = 2, settled = 1 }, false), true)
  send("piflow/runProgress", delta(gap, "running", { agent("a2", "failed") }, { total = 2, settled = 2 }, false))
  wait_for("the resync", 2000, function()
    return runs.agents(gap) ~= nil
  end)
  out.gap_agents = ids(gap)
  send("piflow/runProgress", delta(gap, "running", { agent("a1", "running") }, { total = 2, settled = 1 }, false))
  out.gap_after = ids(gap)
  out.gap_calls = #calls

  -- Reset, then deltas: upserted by id, counts of the whole run from agentCounts.
  send("piflow/runProgress", delta("small", "running", { agent("x", "running"), agent("y", "queued") },
    { total = 2, settled = 0 }, true))
  send("piflow/runProgress", delta("small", "running", { agent("y", "completed"), agent("z", "queued") },
    { total = 3, settled = 1 }, false))
  out.small_agents = ids("small")
  out.small_described = runs.describe(runs.get("small"))
  -- Without `reset` (an older server's full snapshot) the list is replaced, and counted.
  send("piflow/runProgress", { runId = "small", state = "running", agents = { agent("w", "completed") },
    budget = { limits = {}, usage = {}, events = {} }, checkpoints = {} })
  out.snapshot_agents = ids("small")
  out.snapshot_described = runs.describe(runs.get("small"))

  -- 3,000 agents, then 100 deltas of 5: each old agent counts its reads, so any pass over the
  -- whole run (a merge, a count, a redraw) shows.
  local total, reads = 3000, 0
  local everyone = {}
  for i = 1, total do
    local fields = agent("agent-" .. i, "queued")
    everyone[i] = setmetatable({}, { __index = function(_, key)
      reads = reads + 1
      return fields[key]
    end })
  end
  runs.update(delta("big", "running", everyone, { total = total, settled = 0 }, true))
  reads, lens_refreshes = 0, 0
  local started = vim.loop.hrtime()
  for round = 0, 99 do
    local changed = {}
    for k = 1, 5 do
      table.insert(changed, agent("agent-" .. (total - round * 5 - k + 1), "completed"))
    end
    send("piflow/runProgress", delta("big", "running", changed, { total = total, settled = (round + 1) * 5 }, false), true)
  end
  wait_for("the deltas", 10000, function()
    return runs.get("big").agents.settled == 500
  end)
  local merged_reads = reads
  out.big = {
    ms = (vim.loop.hrtime() - started) / 1e6,
    reads = merged_reads,
    lens_refreshes = lens_refreshes,
    size = #runs.agents("big"),
    completed = #vim.tbl_filter(function(a)
      return a.state == "completed"
    end, runs.agents("big")),
    described = runs.describe(runs.get("big")),
    calls = #calls,
  }
end

-- piflow and a real TypeScript server (typescript-language-server, with piflow's TypeScript
-- plugin) on the same workflow buffers: both attach, and tsserver accepts the top-level return
-- and await of the bundled examples while still flagging them in plain JavaScript.
function scenarios.typescript()
  local piflow = require("piflow")
  piflow.setup({ cmd = spec.cmd, progress = "off", approval_idle_ms = 0 })
  out.plugin = piflow.typescript_plugin()
  local published = {} -- uri → the diagnostics ts_ls published last
  vim.lsp.config("ts_ls", {
    cmd = { spec.tsls, "--stdio" },
    filetypes = { "javascript" },
    root_markers = { ".git" },
    init_options = { plugins = { out.plugin }, tsserver = { path = spec.tsserver } },
    handlers = {
      ["textDocument/publishDiagnostics"] = function(err, result, ctx)
        published[result.uri] = result.diagnostics
        return vim.lsp.diagnostic.on_publish_diagnostics(err, result, ctx)
      end,
    },
  })
  vim.lsp.enable("ts_ls")
  local compat = require("piflow.compat")
  out.files = {}
  for _, name in ipairs(spec.files) do
    vim.cmd("edit " .. spec.dir .. "/" .. name)
    local bufnr = vim.api.nvim_get_current_buf()
    local uri = vim.uri_from_bufnr(bufnr)
    wait_for("ts_ls diagnostics of " .. name, 30000, function()
      return published[uri] ~= nil
    end)
    local messages = {}
    for _, d in ipairs(published[uri]) do
      table.insert(messages, string.format("%d:%d %s", d.range.start.line + 1, d.code or 0, d.message))
    end
    out.files[name] = {
      filetype = vim.bo[bufnr].filetype,
      piflow = #compat.get_clients("piflow", bufnr),
      ts_ls = #compat.get_clients("ts_ls", bufnr),
      diagnostics = messages,
    }
  end
  -- The workflow globals are typed: tsserver's hover on `agent` shows its declaration.
  vim.cmd("edit " .. spec.dir .. "/review.workflow.js")
  local ts = compat.get_clients("ts_ls", 0)[1]
  local line = vim.api.nvim_buf_get_lines(0, 1, 2, false)[1]
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(0) },
    position = { line = 1, character = line:find("agent(", 1, true) },
  }
  local response = ts:request_sync("textDocument/hover", params, 10000, 0)
  out.hover = response and response.result and response.result.contents
end

local ok, err = xpcall(scenarios[spec.scenario], debug.traceback)
if not ok then
  out.error = err
end
local file = assert(io.open(spec.output, "w"))
file:write(vim.json.encode(out))
file:close()
vim.cmd("qa!")
