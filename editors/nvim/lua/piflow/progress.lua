-- Run progress through vim.notify, throttled per run so a busy run cannot flood the messages.
local compat = require("piflow.compat")
local config = require("piflow.config")
local notify = require("piflow.message").notify
local runs = require("piflow.runs")

local M = {}

-- runId → what was last shown {at, state, phase, text}
local shown = {}

--- Whether something shows the server's standard $/progress already: fidget.nvim, or any
--- LspProgress autocmd (Neovim 0.10+: progress plugins, statuslines).
local function progress_shown_elsewhere()
  if package.loaded["fidget"] ~= nil then
    return true
  end
  local ok, autocmds = pcall(vim.api.nvim_get_autocmds, { event = "LspProgress" })
  return ok and #autocmds > 0
end

--- Whether progress goes to vim.notify: "auto" leaves it to what shows $/progress, so the same
--- run is not reported twice.
function M.enabled()
  local mode = config.get().progress
  if mode == "auto" then
    return not progress_shown_elsewhere()
  end
  return mode == "notify"
end

--- Shows `run` if its state or phase changed, or if the interval passed since the last message.
function M.report(run)
  -- A final state is announced by piflow/runFinished, with the result or the error.
  if not M.enabled() or runs.TERMINAL[run.state] then
    return
  end
  local text = runs.describe(run)
  local now = compat.uv.now()
  local last = shown[run.runId]
  local milestone = not last or last.state ~= run.state or last.phase ~= run.phase
  local due = last and text ~= last.text and now - last.at >= config.get().progress_interval_ms
  if milestone or due then
    shown[run.runId] = { at = now, state = run.state, phase = run.phase, text = text }
    notify(text)
  end
end

function M.finish(run_id)
  shown[run_id] = nil
end

return M
