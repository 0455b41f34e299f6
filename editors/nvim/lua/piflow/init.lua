-- piflow for Neovim: the `piflow serve` language server for agent workflow scripts
-- (*.workflow.js), with runs, progress and approvals in the editor. See :help piflow.
local M = {}

--- Configures the plugin (see :help piflow-setup); calling it again replaces the options.
function M.setup(opts)
  local cfg = require("piflow.config").set(opts)
  require("piflow.client").register(cfg)
  require("piflow.usercmds").create()
end

--- `piflow: 1 running, 1 awaiting` while runs are active, "" otherwise.
function M.statusline()
  return require("piflow.runs").statusline()
end

--- Runs the workflow script of `bufnr` (default: current) with `opts` {args, budget,
--- concurrency, backend, fixtures}, e.g. from a keymap.
function M.run(opts, bufnr)
  return require("piflow.commands").run(bufnr or vim.api.nvim_get_current_buf(), opts)
end

--- The TypeScript server plugin entry for ts_ls / vtsls (`init_options.plugins`), so that
--- they type the workflow globals and accept a workflow's top-level return and await. See
--- :help piflow-typescript.
function M.typescript_plugin()
  return require("piflow.typescript").plugin()
end

--- Known runs, most in need of attention first (records as the protocol describes them).
function M.runs()
  return require("piflow.runs").list()
end

return M
