-- The plugin's options: defaults, validation of what setup() is given, and the options in force.
local M = {}

M.defaults = {
  -- How to start the language server (stdio).
  cmd = { "piflow", "serve" },
  -- File name globs that mark a workflow script (matched against the file name, or against the
  -- path when the glob holds a `/`). The buffers keep the `javascript` filetype, so ts_ls or
  -- vtsls attach beside piflow (see typescript_plugin() for their top-level return/await).
  patterns = { "*.workflow.js" },
  -- The project root is the nearest ancestor holding one of these, tried in order.
  root_markers = { "piflow.toml", ".git" },
  -- Merged into the client capabilities (e.g. from a completion plugin).
  capabilities = {},
  -- Extra `initializationOptions.piflow` keys (e.g. { debounceMs = 150 }).
  init_options = {},
  -- Show the server's code lenses (▶ Run, ↻ Resume, ✓ Approve, ...).
  codelens = true,
  -- Re-fetch lenses on BufEnter/CursorHold/InsertLeave and whenever a run changes.
  auto_refresh_lenses = true,
  -- Show inlay hints (resolved aliases, per-agent results); needs Neovim 0.10+.
  inlay_hints = true,
  -- Ask checkpoint and budget approvals with vim.ui.select once you are idle in normal mode
  -- (never while you type); false only lists them for :PiflowApprove / :PiflowReject.
  approvals = true,
  -- How long no key must have been pressed, in normal mode, before an approval is asked.
  approval_idle_ms = 1000,
  -- Run progress through vim.notify: "auto" stays quiet when something shows the server's
  -- standard $/progress (fidget.nvim, or any LspProgress autocmd), "notify" always, "off" never.
  progress = "auto",
  -- At most one progress message per run in this many milliseconds (state and phase changes
  -- are always shown).
  progress_interval_ms = 2000,
  -- Show a script's log() lines through vim.notify.
  show_logs = true,
  -- Called as on_attach(client, bufnr) after the plugin's own attach work.
  on_attach = false,
}

local allowed = {
  progress = { auto = true, notify = true, off = true },
}

-- Options of earlier versions, with what replaced them.
local removed = {
  filetype = "workflow scripts keep the `javascript` filetype now; use `patterns` to choose them",
}

local current = vim.deepcopy(M.defaults)
local was_set = false

local function check(key, value)
  local default = M.defaults[key]
  if removed[key] then
    error(string.format("piflow.setup: option %q was removed: %s", key, removed[key]), 0)
  end
  if default == nil then
    error(string.format("piflow.setup: unknown option %q", key), 0)
  end
  if key == "on_attach" then
    if value ~= false and type(value) ~= "function" then
      error("piflow.setup: on_attach must be a function", 0)
    end
    return
  end
  if type(value) ~= type(default) then
    error(string.format("piflow.setup: %s must be a %s, got %s", key, type(default), type(value)), 0)
  end
  if allowed[key] and not allowed[key][value] then
    local names = vim.tbl_keys(allowed[key])
    table.sort(names)
    error(string.format("piflow.setup: %s must be one of %s, got %q", key, table.concat(names, ", "), value), 0)
  end
  if key == "cmd" and (#value == 0 or type(value[1]) ~= "string") then
    error("piflow.setup: cmd must be a non-empty list of strings", 0)
  end
  if key == "patterns" and (#value == 0 or type(value[1]) ~= "string") then
    error("piflow.setup: patterns must be a non-empty list of globs", 0)
  end
  if key == "approval_idle_ms" and value < 0 then
    error("piflow.setup: approval_idle_ms must not be negative", 0)
  end
end

--- Validates `opts` (errors name the option) and makes defaults + opts the options in force.
function M.set(opts)
  opts = opts or {}
  for key, value in pairs(opts) do
    check(key, value)
  end
  current = vim.tbl_extend("force", vim.deepcopy(M.defaults), opts)
  was_set = true
  return current
end

--- Whether setup() has been called.
function M.configured()
  return was_set
end

function M.get()
  return current
end

return M
