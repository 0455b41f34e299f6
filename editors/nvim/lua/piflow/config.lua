-- The plugin's options: defaults, validation of what setup() is given, and the options in force.
local M = {}

M.defaults = {
  -- How to start the language server (stdio).
  cmd = { "piflow", "serve" },
  -- Workflow scripts get a compound filetype: Neovim loads JavaScript's syntax, indent and
  -- ftplugin for it on every version (and treesitter maps it to the javascript parser), while
  -- servers configured for plain `javascript` (ts_ls, eslint) stay away, since they would flag
  -- a workflow's top-level `await` and `return`.
  filetype = "javascript.piflow",
  -- File name globs that mark a workflow script.
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
  -- Ask checkpoint and budget approvals with vim.ui.select as they arrive.
  approvals = true,
  -- Run progress through vim.notify: "auto" stays quiet when fidget.nvim is loaded (it already
  -- shows the server's $/progress), "notify" always, "off" never.
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

local current = vim.deepcopy(M.defaults)
local was_set = false

local function check(key, value)
  local default = M.defaults[key]
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
