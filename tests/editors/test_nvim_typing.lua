-- The typing scenario of tests/editors/test_nvim.py, in a Neovim with its terminal UI (run in a
-- pseudo-terminal): a run reaches a checkpoint while the user is typing in insert mode. Keys
-- arrive one by one through nvim_input from a timer, as a user's would, whatever the editor is
-- doing. Everything here is driven by the event loop (a coroutine resumed by timers), so
-- Neovim reads input, redraws and prompts exactly as it does for a user.
--
-- $PIFLOW_NVIM_SPEC names {plugin, cmd, dir, output, idle_ms}; what was observed goes to output.
local spec_file = assert(io.open(assert(os.getenv("PIFLOW_NVIM_SPEC")), "r"))
local spec = vim.json.decode(spec_file:read("*a"))
spec_file:close()

vim.opt.runtimepath:prepend(spec.plugin)
local uv = vim.uv or vim.loop

local out = { selects = {}, hit_enter = {}, typed = {} }
local t0 = uv.now()
local function now()
  return uv.now() - t0
end

local function write_out()
  local file = assert(io.open(spec.output, "w"))
  file:write(vim.json.encode(out))
  file:close()
end

-- A fast timer, so it fires even if the editor were stuck in a prompt: fail rather than hang.
local watchdog = uv.new_timer()
watchdog:start(100000, 0, function()
  out.error = string.format("watchdog: the scenario did not finish in 100 s (at step %s, %s)", out.step,
    tostring(out.resume_error))
  write_out()
  os.exit(1)
end)

-- Neovim's own vim.notify and vim.ui.select stay in charge (they echo, prompt and may cause
-- hit-enter prompts): messages are read from :messages at the end, and the select wrapper only
-- notes the question and the mode it came in.
local builtin_select = vim.ui.select
local answer_with -- keys that answer the next prompt, fed 300 ms after it opens
local selecting = false -- while the question is open (Neovim 0.7 reports its inputlist() as "rm")
vim.ui.select = function(items, opts, on_choice)
  local mode = vim.api.nvim_get_mode()
  table.insert(out.selects, { prompt = opts.prompt, mode = mode.mode, blocking = mode.blocking, at = now() })
  if answer_with then
    local keys = answer_with
    answer_with = nil
    local timer = uv.new_timer()
    timer:start(300, 0, function()
      timer:close()
      vim.api.nvim_input(keys)
    end)
  end
  selecting = true
  return builtin_select(items, opts, function(...)
    selecting = false
    return on_choice(...)
  end)
end

-- Every 50 ms: was Neovim at a hit-enter prompt ("r", "rm")? (nvim_get_mode is fast.)
local sampler = uv.new_timer()
sampler:start(50, 50, function()
  local mode = vim.api.nvim_get_mode().mode
  if (mode == "r" or mode == "rm") and not selecting and #out.hit_enter < 20 then
    table.insert(out.hit_enter, { mode = mode, at = now(), step = out.step })
  end
end)

local driver
local function resume_later(ms)
  vim.defer_fn(function()
    local ok, err = coroutine.resume(driver)
    if not ok then
      out.resume_error = debug.traceback(driver, err)
    end
  end, ms)
end
local function sleep(ms)
  resume_later(ms)
  coroutine.yield()
end
local function wait_for(what, timeout_ms, condition)
  local deadline = now() + timeout_ms
  while not condition() do
    if now() > deadline then
      error("timed out after " .. timeout_ms .. " ms waiting for " .. what, 2)
    end
    sleep(25)
  end
end

local function scenario()
  local piflow = require("piflow")
  piflow.setup({ cmd = spec.cmd, progress = "notify", approval_idle_ms = spec.idle_ms })
  local approvals = require("piflow.approvals")
  local runs = require("piflow.runs")

  out.step = "open the script"
  vim.cmd("edit " .. spec.dir .. "/review.workflow.js")
  local script = vim.api.nvim_get_current_buf()
  wait_for("piflow to attach", 20000, function()
    return #require("piflow.compat").get_clients("piflow", script) > 0
  end)
  vim.cmd("split " .. spec.dir .. "/notes.txt")
  local notes = vim.api.nvim_get_current_buf()

  -- The lines to type: digits and letters that would answer a prompt if it caught them.
  local keys = { "i" }
  local function add_line(index)
    local line = string.format("typed line %02d: 1 2 y n Approve", index)
    table.insert(out.typed, line)
    for char in line:gmatch(".") do
      table.insert(keys, char)
    end
    table.insert(keys, "<CR>")
  end
  local lines_after_checkpoint
  local typing = uv.new_timer()
  local next_key = 1
  -- Fast callback: keys keep arriving whatever Neovim is busy with, like a user's.
  typing:start(0, 15, function()
    if next_key > #keys then
      if lines_after_checkpoint == nil or #out.typed < lines_after_checkpoint then
        if #out.typed >= 200 then
          typing:stop()
          return
        end
        add_line(#out.typed + 1)
      else
        typing:stop()
        vim.api.nvim_input("<Esc>")
        out.typing_ended_at = now()
        return
      end
    end
    vim.api.nvim_input(keys[next_key])
    next_key = next_key + 1
  end)
  for index = 1, 5 do
    add_line(index)
  end

  out.step = "run while typing"
  wait_for("insert mode", 5000, function()
    return vim.api.nvim_get_mode().mode == "i"
  end)
  out.run_at = now()
  piflow.run({}, script)
  wait_for("the checkpoint", 30000, function()
    return #approvals.list() > 0
  end)
  out.checkpoint_at = now()
  out.mode_at_checkpoint = vim.api.nvim_get_mode().mode
  -- Keep typing for eight more lines once the checkpoint is pending.
  lines_after_checkpoint = #out.typed + 8

  out.step = "idle in normal mode"
  wait_for("the end of typing", 60000, function()
    return out.typing_ended_at ~= nil and vim.api.nvim_get_mode().mode == "n"
  end)
  answer_with = "1<CR>" -- "1. Approve"
  wait_for("the approval question", 10000, function()
    return #out.selects > 0
  end)
  local run_id = approvals.list()[1] and approvals.list()[1].runId or runs.list()[1].runId
  wait_for("the run to finish", 30000, function()
    local run = runs.get(run_id)
    return run ~= nil and run.state == "completed" and run.result ~= nil
  end)
  out.step = "after the run"
  out.finished = { state = runs.get(run_id).state, result = runs.get(run_id).result }
  -- Time for any late message to bring up a hit-enter prompt.
  sleep(1500)
  out.mode_after = vim.api.nvim_get_mode()
  out.notes = vim.api.nvim_buf_get_lines(notes, 0, -1, false)
  out.step = "done"
end

driver = coroutine.create(function()
  local ok, err = xpcall(scenario, debug.traceback)
  if not ok then
    out.error = err
  end
  sampler:stop()
  watchdog:stop()
  out.messages = vim.split(vim.fn.execute("messages"), "\n", { trimempty = true })
  write_out()
  vim.cmd("qa!")
end)
-- Start once Neovim has entered its main loop (after this -c command).
resume_later(0)
