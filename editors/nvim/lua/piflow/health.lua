-- :checkhealth piflow — the server command and its version, the options in force, running clients,
-- and what `piflow doctor` knows (agent dir, models, backends and their credentials).
local client = require("piflow.client")
local compat = require("piflow.compat")
local config = require("piflow.config")

local M = {}

-- vim.health got start/ok/... in 0.10 (report_* in 0.8 and 0.9); 0.7 has the health# functions.
local function reporter()
  local health = vim.health
  if health and health.start then
    return health
  end
  if health and health.report_start then
    return {
      start = health.report_start,
      ok = health.report_ok,
      info = health.report_info,
      warn = health.report_warn,
      error = health.report_error,
    }
  end
  local function call(kind)
    return function(msg, advice)
      if advice then
        vim.fn["health#report_" .. kind](msg, type(advice) == "table" and advice or { advice })
      else
        vim.fn["health#report_" .. kind](msg)
      end
    end
  end
  return { start = call("start"), ok = call("ok"), info = call("info"), warn = call("warn"), error = call("error") }
end

--- The command that prints the server's version: cmd up to `serve`, then --version.
local function version_cmd(cmd)
  local argv = {}
  for _, arg in ipairs(cmd) do
    if arg == "serve" then
      break
    end
    table.insert(argv, arg)
  end
  table.insert(argv, "--version")
  return argv
end

local function check_server(h, cfg)
  h.start("piflow: language server")
  local exe = cfg.cmd[1]
  if vim.fn.executable(exe) ~= 1 then
    h.error(string.format("%s is not executable (cmd = %s)", exe, vim.inspect(cfg.cmd)), {
      "Install piflow (pip install . or scripts/bootstrap in a checkout) so that `piflow` is on $PATH,",
      "or point setup{ cmd = { '/path/to/piflow', 'serve' } } at it.",
    })
    return
  end
  h.ok(string.format("server command: %s (%s)", table.concat(cfg.cmd, " "), vim.fn.exepath(exe)))
  local argv = version_cmd(cfg.cmd)
  local output = vim.fn.system(argv)
  local version = vim.trim(output)
  if vim.v.shell_error == 0 and version ~= "" then
    h.ok("version: " .. version)
  else
    h.warn(string.format("`%s` failed (exit %d): %s", table.concat(argv, " "), vim.v.shell_error, version))
  end
end

local function check_neovim(h, cfg)
  h.start("piflow: Neovim")
  local v = vim.version()
  h.ok(string.format("Neovim %d.%d.%d", v.major, v.minor, v.patch))
  if vim.lsp.config and vim.lsp.enable then
    h.ok("server registered with vim.lsp.config / vim.lsp.enable")
  else
    h.ok("server started from a FileType autocmd (no vim.lsp.enable before 0.11)")
  end
  if cfg.inlay_hints and not (vim.lsp.inlay_hint and vim.lsp.inlay_hint.enable) then
    h.info("inlay hints need Neovim 0.10+: not shown")
  end
  if compat.has("0.8") then
    local detected = vim.filetype.match({ filename = "example.workflow.js" })
    if detected == "javascript" then
      h.ok("example.workflow.js is detected as javascript: piflow and ts_ls/vtsls both attach")
    else
      h.warn(string.format("example.workflow.js is detected as %s, not javascript", tostring(detected)),
        { "A vim.filetype.add() rule of your config gives workflow scripts another filetype." })
    end
  end
end

local function check_typescript(h)
  h.start("piflow: TypeScript plugin (for ts_ls / vtsls)")
  local dir = require("piflow.typescript").bundled_dir()
  if vim.fn.filereadable(dir .. "/index.js") == 1 then
    h.ok("bundled plugin: " .. dir)
    h.info("give ts_ls init_options.plugins = { require('piflow').typescript_plugin() } (:help piflow-typescript)")
  else
    h.warn(dir .. "/index.js not found: ts_ls/vtsls will flag a workflow's top-level return and await",
      { "Install the plugin from the piflow repository, which has editors/typescript-plugin beside editors/nvim." })
  end
end

--- `piflow doctor --json` (cmd up to `serve`, then doctor) in the project of the current buffer.
local function doctor_cmd(cmd, root)
  local argv = version_cmd(cmd)
  argv[#argv] = "doctor"
  table.insert(argv, "--json")
  table.insert(argv, root)
  return argv
end

--- What `piflow doctor` knows (agent dir, settings, models, backends and their credentials),
--- each check as OK or a warning: a backend that is not set up is no error.
local function check_doctor(h, cfg)
  h.start("piflow: doctor")
  if vim.fn.executable(cfg.cmd[1]) ~= 1 then
    h.info("skipped: the server command is not executable")
    return
  end
  local lsp_client = client.get()
  local root = lsp_client and lsp_client.config.root_dir or vim.fn.getcwd()
  local argv = doctor_cmd(cfg.cmd, root)
  local output = vim.fn.system(argv)
  local ok, report = pcall(vim.json.decode, output)
  if vim.v.shell_error ~= 0 or not ok or type(report) ~= "table" then
    h.warn(string.format("`%s` failed (exit %d): %s", table.concat(argv, " "), vim.v.shell_error,
      vim.trim(output):sub(1, 500)))
    return
  end
  report = compat.without_nulls(report)
  for _, check in ipairs(report.checks or {}) do
    if type(check) == "table" and type(check.text) == "string" then
      if check.ok == false then
        h.warn(check.text, check.hint)
      elseif check.level == "info" then
        h.info(check.text)
      else
        h.ok(check.text)
      end
    end
  end
  if type(report.models) == "table" then
    local names = {}
    for _, model in ipairs(report.models) do
      table.insert(names, type(model) == "table" and (model.id or model.name or vim.inspect(model)) or tostring(model))
    end
    if #names == 0 then
      h.info("models available: none (the scripted backend needs none)")
    else
      h.ok(string.format("models available (%d): %s", #names, table.concat(names, ", ")))
    end
  end
  local backends = type(report.backends) == "table" and vim.tbl_keys(report.backends) or {}
  table.sort(backends)
  for _, name in ipairs(backends) do
    local backend = report.backends[name]
    if type(backend) == "table" then
      local text = string.format("backend %s: %s", name, tostring(backend.text or ""))
      if backend.ok then
        h.ok(text)
      else
        h.info(text)
      end
    end
  end
end

local function check_config(h, cfg)
  h.start("piflow: configuration")
  if not config.configured() then
    h.warn("require('piflow').setup() has not been called: the defaults below are not in use")
  end
  local progress = cfg.progress
  if progress == "auto" then
    progress = require("piflow.progress").enabled() and "auto (vim.notify)" or "auto (left to $/progress: fidget.nvim or an LspProgress autocmd)"
  end
  for _, line in ipairs({
    "cmd = " .. vim.inspect(cfg.cmd),
    "patterns = " .. vim.inspect(cfg.patterns),
    "root_markers = " .. vim.inspect(cfg.root_markers),
    string.format("codelens = %s, auto_refresh_lenses = %s, inlay_hints = %s", tostring(cfg.codelens),
      tostring(cfg.auto_refresh_lenses), tostring(cfg.inlay_hints)),
    string.format("approvals = %s (asked after %d ms idle in normal mode), progress = %s, show_logs = %s",
      tostring(cfg.approvals), cfg.approval_idle_ms, progress, tostring(cfg.show_logs)),
  }) do
    h.info(line)
  end
end

local function check_clients(h)
  h.start("piflow: clients")
  local clients = compat.get_clients(client.name)
  if #clients == 0 then
    h.info("no piflow client is running (one starts when a workflow script is opened)")
  end
  for _, lsp_client in ipairs(clients) do
    h.ok(string.format("client %d running in %s", lsp_client.id, lsp_client.config.root_dir or "(no root)"))
  end
end

function M.check()
  local h = reporter()
  local cfg = config.get()
  check_server(h, cfg)
  check_neovim(h, cfg)
  check_typescript(h)
  check_config(h, cfg)
  check_clients(h)
  check_doctor(h, cfg)
end

return M
