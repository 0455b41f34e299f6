-- Code lenses of workflow scripts (▶ Run, ↻ Resume, ⏸ Pause, ■ Stop, ✓ Approve, ✗ Reject): shown
-- on attach and kept fresh, since they change with run state, not only with the text.
local compat = require("piflow.compat")
local config = require("piflow.config")

local M = {}

-- bufnr → id of the piflow client whose lenses it shows.
local attached = {}

function M.refresh(bufnr)
  local client_id = attached[bufnr]
  if not client_id then
    return
  end
  -- 0.7 has no LspDetach: drop buffers that were unloaded or lost their client.
  if not vim.api.nvim_buf_is_loaded(bufnr) or not vim.lsp.buf_is_attached(bufnr, client_id) then
    attached[bufnr] = nil
    return
  end
  compat.refresh_codelens(bufnr, client_id)
end

-- Buffers with a refresh already scheduled by run events.
local scheduled = {}

-- Run events come in bursts (progress every ~150 ms): they are coalesced into one refresh per
-- buffer at most every RUN_EVENT_DELAY_MS. Waiting also lets an earlier lens request finish,
-- which matters because Neovim drops a refresh while one is still in flight for the buffer.
local RUN_EVENT_DELAY_MS = 250

--- Refreshes every buffer showing `uri` (all piflow buffers when `uri` is nil): a run changed.
function M.refresh_uri(uri)
  if not config.get().auto_refresh_lenses then
    return
  end
  for bufnr in pairs(attached) do
    if not scheduled[bufnr] and (uri == nil or vim.uri_from_bufnr(bufnr) == uri) then
      scheduled[bufnr] = true
      vim.defer_fn(function()
        scheduled[bufnr] = nil
        M.refresh(bufnr)
      end, RUN_EVENT_DELAY_MS)
    end
  end
end

function M.attach(client, bufnr)
  local cfg = config.get()
  if not cfg.codelens or not client.server_capabilities.codeLensProvider then
    return
  end
  attached[bufnr] = client.id
  M.refresh(bufnr)
  -- Neovim 0.12's vim.lsp.codelens.enable() refetches on edits by itself.
  if cfg.auto_refresh_lenses and not vim.lsp.codelens.enable then
    vim.api.nvim_create_autocmd({ "BufEnter", "CursorHold", "InsertLeave" }, {
      group = vim.api.nvim_create_augroup("piflow.lenses." .. bufnr, { clear = true }),
      buffer = bufnr,
      callback = function()
        M.refresh(bufnr)
      end,
    })
  end
end

return M
