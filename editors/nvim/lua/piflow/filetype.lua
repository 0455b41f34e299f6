-- Recognising workflow scripts: file name globs → the plugin's filetype.
local compat = require("piflow.compat")

local M = {}

--- A glob (`*`, `?`, literal text) as an anchored-by-caller Lua pattern.
function M.glob_to_pattern(glob)
  local escaped = glob:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0")
  return (escaped:gsub("%%%*", ".*"):gsub("%%%?", "."))
end

-- Buffers opened before setup() (a lazy-loaded plugin) were detected without the globs.
local function redetect_open_buffers(filetype, globs)
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(bufnr) and vim.bo[bufnr].buftype == "" and vim.bo[bufnr].filetype ~= filetype then
      local tail = vim.fn.fnamemodify(vim.api.nvim_buf_get_name(bufnr), ":t")
      for _, glob in ipairs(globs) do
        if tail:match("^" .. M.glob_to_pattern(glob) .. "$") then
          vim.bo[bufnr].filetype = filetype
          break
        end
      end
    end
  end
end

function M.register(filetype, globs)
  redetect_open_buffers(filetype, globs)
  if compat.has("0.8") then
    -- filetype.lua detects in one step, so the buffer never passes through plain `javascript`
    -- (which would start any JavaScript language server first).
    local patterns = {}
    for _, glob in ipairs(globs) do
      patterns[M.glob_to_pattern(glob)] = filetype
    end
    vim.filetype.add({ pattern = patterns })
    return
  end
  -- 0.7 uses filetype.lua only when g:do_filetype_lua is set; an autocmd works either way and
  -- overrides the `setf javascript` of filetype.vim whichever runs first.
  local group = vim.api.nvim_create_augroup("piflow.filetype", { clear = true })
  vim.api.nvim_create_autocmd({ "BufRead", "BufNewFile" }, {
    group = group,
    pattern = globs,
    callback = function(args)
      vim.bo[args.buf].filetype = filetype
    end,
  })
end

return M
