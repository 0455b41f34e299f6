-- :checkhealth piflow — the server command and its version, the options in force, running clients.
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
    if detected == cfg.filetype then
      h.ok(string.format("example.workflow.js is detected as %s", cfg.filetype))
    else
      h.warn(string.format("example.workflow.js is detected as %s, not %s", tostring(detected), cfg.filetype),
        { "Another vim.filetype.add() rule takes precedence over piflow's patterns." })
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
    progress = require("piflow.progress").enabled() and "auto (vim.notify)" or "auto (left to fidget.nvim)"
  end
  for _, line in ipairs({
    "cmd = " .. vim.inspect(cfg.cmd),
    "filetype = " .. cfg.filetype .. ", patterns = " .. vim.inspect(cfg.patterns),
    "root_markers = " .. vim.inspect(cfg.root_markers),
    string.format("codelens = %s, auto_refresh_lenses = %s, inlay_hints = %s", tostring(cfg.codelens),
      tostring(cfg.auto_refresh_lenses), tostring(cfg.inlay_hints)),
    string.format("approvals = %s, progress = %s, show_logs = %s", tostring(cfg.approvals), progress,
      tostring(cfg.show_logs)),
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
  check_config(h, cfg)
  check_clients(h)
end

return M
