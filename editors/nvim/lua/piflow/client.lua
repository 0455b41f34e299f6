-- The `piflow serve` language client: its configuration, how it is started on each Neovim
-- version, and finding it again.
local compat = require("piflow.compat")
local lenses = require("piflow.lenses")
local scripts = require("piflow.scripts")

local M = {}

M.name = "piflow"

local function on_attach(cfg, client, bufnr)
  lenses.attach(client, bufnr)
  if cfg.inlay_hints and client.server_capabilities.inlayHintProvider then
    compat.enable_inlay_hints(bufnr)
  end
  if cfg.on_attach then
    cfg.on_attach(client, bufnr)
  end
end

--- The client configuration shared by every way of starting it.
function M.config(cfg)
  return {
    name = M.name,
    cmd = cfg.cmd,
    capabilities = vim.tbl_deep_extend("force", vim.lsp.protocol.make_client_capabilities(), cfg.capabilities),
    init_options = {
      piflow = vim.tbl_extend("force", cfg.init_options, { customNotifications = true }),
    },
    -- Required here, not at the top: both lead back to this module (to find the client).
    -- Only buffers matching `patterns` reach this client; telling the server they are workflow
    -- scripts makes custom patterns work without repeating them in piflow.toml. The buffers stay
    -- `javascript` for every other client.
    get_language_id = function()
      return "piflow-workflow"
    end,
    handlers = require("piflow.notifications").handlers(),
    commands = require("piflow.commands").client_side,
    on_attach = function(client, bufnr)
      on_attach(cfg, client, bufnr)
    end,
  }
end

--- The nearest ancestor of the buffer's file holding a marker (markers tried in order), else
--- the file's own directory.
local function root_dir(bufnr, markers)
  local name = vim.api.nvim_buf_get_name(bufnr)
  local start = name ~= "" and vim.fn.fnamemodify(name, ":p:h") or vim.fn.getcwd()
  for _, marker in ipairs(markers) do
    local dir = start
    while true do
      if compat.uv.fs_stat(dir .. "/" .. marker) then
        return dir
      end
      local parent = vim.fn.fnamemodify(dir, ":h")
      if parent == dir then
        break
      end
      dir = parent
    end
  end
  return start
end

-- 0.7 has no vim.lsp.start: reuse a live client of the same root, or start one.
local function start_legacy(bufnr, config)
  for _, client in ipairs(compat.get_clients(M.name)) do
    if client.config.root_dir == config.root_dir and not client.is_stopped() then
      vim.lsp.buf_attach_client(bufnr, client.id)
      return
    end
  end
  local id = vim.lsp.start_client(config)
  if id then
    vim.lsp.buf_attach_client(bufnr, id)
  end
end

--- Starts (or reuses) the client for `javascript` buffers whose file matches `cfg.patterns`; the
--- buffers stay `javascript`, so ts_ls or vtsls attach to them as well.
function M.register(cfg)
  local config = M.config(cfg)
  if vim.lsp.config and vim.lsp.enable then -- 0.11+
    config.filetypes = { "javascript" }
    -- Not calling on_dir keeps the client away from other JavaScript files.
    config.root_dir = function(bufnr, on_dir)
      if scripts.is_script(bufnr, cfg.patterns) then
        on_dir(root_dir(bufnr, cfg.root_markers))
      end
    end
    vim.lsp.config(M.name, config)
    vim.lsp.enable(M.name)
    return
  end
  local function start(bufnr)
    if not scripts.is_script(bufnr, cfg.patterns) then
      return
    end
    local buffer_config = vim.tbl_extend("force", config, { root_dir = root_dir(bufnr, cfg.root_markers) })
    if vim.lsp.start then -- 0.8 to 0.10
      vim.lsp.start(buffer_config, { bufnr = bufnr })
    else
      start_legacy(bufnr, buffer_config)
    end
  end
  local group = vim.api.nvim_create_augroup("piflow.client", { clear = true })
  vim.api.nvim_create_autocmd("FileType", {
    group = group,
    pattern = "javascript",
    callback = function(args)
      start(args.buf)
    end,
  })
  -- Scripts opened before setup() (a lazily loaded plugin) start it now.
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(bufnr) and vim.bo[bufnr].filetype == "javascript" then
      start(bufnr)
    end
  end
end

--- The client to send commands through: the one attached to `bufnr`, else any live one.
function M.get(bufnr)
  return compat.get_clients(M.name, bufnr)[1] or compat.get_clients(M.name)[1]
end

return M
