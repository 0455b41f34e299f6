-- Messages to the user, all through vim.notify so notification plugins (nvim-notify, noice,
-- fidget's notify) show them.
local M = {}

function M.notify(message, level)
  vim.notify("piflow: " .. message, level or vim.log.levels.INFO, { title = "piflow" })
end

--- A JSON value on one line, cut at `limit` bytes (results and contexts can be large).
function M.compact_json(v, limit)
  local ok, text = pcall(vim.json.encode, v)
  text = ok and text or tostring(v)
  if #text > limit then
    text = text:sub(1, limit) .. "…"
  end
  return text
end

return M
