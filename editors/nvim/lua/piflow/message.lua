-- Messages to the user, all through vim.notify so notification plugins (nvim-notify, noice,
-- fidget's notify) show them. Each is one line: with Neovim's own vim.notify, a message wider
-- than the echo area or spanning lines stops the editor at a hit-enter prompt.
local M = {}

--- Whether vim.notify is Neovim's own (echoes into the command line), not a plugin's.
local function builtin_notify()
  local info = debug.getinfo(vim.notify, "S")
  return info ~= nil and info.source:find("vim/_editor.lua", 1, true) ~= nil
end

--- `text` on one line, cut (with …) to `width` display cells.
function M.fit(text, width)
  text = text:gsub("%s*\n%s*", " · ")
  if vim.fn.strdisplaywidth(text) <= width then
    return text
  end
  local chars = vim.fn.strchars(text)
  local low, high = 0, chars
  -- The longest prefix that fits with the ellipsis.
  while low < high do
    local mid = math.floor((low + high + 1) / 2)
    if vim.fn.strdisplaywidth(vim.fn.strcharpart(text, 0, mid)) + 1 <= width then
      low = mid
    else
      high = mid - 1
    end
  end
  return vim.fn.strcharpart(text, 0, low) .. "…"
end

function M.notify(message, level)
  local text = "piflow: " .. message
  if builtin_notify() then
    text = M.fit(text, math.max(vim.v.echospace, 20))
    -- A message right after another (or after a prompt such as inputlist()) would scroll the
    -- command line and wait for Enter; a redraw first starts it on a clean line.
    if vim.api.nvim_get_mode().mode ~= "c" then
      vim.cmd("redraw")
    end
  else
    text = M.fit(text, math.huge)
  end
  vim.notify(text, level or vim.log.levels.INFO, { title = "piflow" })
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

--- `CODE: message`, or only the message when the script's author wrote it (`authored`): a script's
--- own `throw new Error("…")` reads as written.
function M.error_text(err)
  if err.authored == true then
    return tostring(err.message or "")
  end
  return string.format("%s: %s", tostring(err.code or "ERROR"), tostring(err.message or ""))
end

return M
