-- Differences between the Neovim versions the plugin supports (0.7.2 to 0.12+), in one place.
local M = {}

function M.has(version)
  return vim.fn.has("nvim-" .. version) == 1
end

M.uv = vim.uv or vim.loop

--- Language clients named `name`, attached to `bufnr` when given.
function M.get_clients(name, bufnr)
  if vim.lsp.get_clients then -- 0.10+
    return vim.lsp.get_clients({ name = name, bufnr = bufnr })
  end
  local found = {}
  local clients = bufnr and vim.lsp.buf_get_clients(bufnr) or vim.lsp.get_active_clients()
  for _, client in pairs(clients) do
    if client.name == name then
      table.insert(found, client)
    end
  end
  return found
end

--- `value` with JSON nulls (vim.NIL) removed from its objects. Neovim versions differ in how
--- they decode a null from the server (vim.NIL or nil, by message kind and version); without
--- them a record reads the same everywhere. Arrays keep theirs, so as not to leave holes.
function M.without_nulls(value)
  if type(value) ~= "table" then
    return value
  end
  local is_list = vim.islist or vim.tbl_islist
  local copy = {}
  for key, v in pairs(value) do
    if v ~= vim.NIL or is_list(value) then
      copy[key] = M.without_nulls(v)
    end
  end
  return copy
end

--- Sends a request; 0.11 made client methods colon calls and deprecated the dot form.
function M.request(client, method, params, handler, bufnr)
  if M.has("0.11") then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

--- Fetches code lenses for `bufnr` now.
function M.refresh_codelens(bufnr, client_id)
  local codelens = vim.lsp.codelens
  if codelens.enable then
    -- 0.12 release: Neovim keeps enabled lenses fresh on edits and on the server's
    -- workspace/codeLens/refresh; a change that comes without either (a run event) is handled
    -- like such a refresh request.
    codelens.enable(true, { bufnr = bufnr })
    local on_refresh = vim.lsp.handlers["workspace/codeLens/refresh"]
    if on_refresh then
      on_refresh(nil, vim.NIL, { client_id = client_id, method = "workspace/codeLens/refresh" })
    end
  elseif M.has("0.10") then
    codelens.refresh({ bufnr = bufnr })
  else
    -- Up to 0.9 refresh() works on the current buffer only.
    vim.api.nvim_buf_call(bufnr, codelens.refresh)
  end
end

--- Turns inlay hints on for `bufnr` where Neovim has them (0.10+).
function M.enable_inlay_hints(bufnr)
  if vim.lsp.inlay_hint and vim.lsp.inlay_hint.enable then
    vim.lsp.inlay_hint.enable(true, { bufnr = bufnr })
  end
end

--- Fires `User <pattern>` for statusline plugins and users' autocmds (data needs 0.8+).
function M.fire_user_event(pattern, data)
  local opts = { pattern = pattern, modeline = false }
  if M.has("0.8") then
    opts.data = data
  end
  vim.api.nvim_exec_autocmds("User", opts)
end

return M
