-- Recognising workflow scripts among JavaScript buffers: the `patterns` globs, matched like
-- autocmd patterns (the file name for a glob without `/`, else the path).
local M = {}

local compiled = {}

local function regex_of(glob)
  if not compiled[glob] then
    local pattern = glob
    -- A relative glob with a directory (`flows/*.js`) matches below any directory.
    if glob:find("/", 1, true) and not glob:match("^[/*]") then
      pattern = "*/" .. glob
    end
    compiled[glob] = vim.regex(vim.fn.glob2regpat(pattern))
  end
  return compiled[glob]
end

--- Whether the file `path` is a workflow script by one of `globs`.
function M.matches(path, globs)
  if path == "" then
    return false
  end
  local tail = vim.fn.fnamemodify(path, ":t")
  for _, glob in ipairs(globs) do
    local subject = glob:find("/", 1, true) and path or tail
    if regex_of(glob):match_str(subject) then
      return true
    end
  end
  return false
end

--- Whether `bufnr` shows a workflow script: a file buffer (not a preview or scratch buffer that
--- borrows the filetype) whose name matches `globs`.
function M.is_script(bufnr, globs)
  return vim.bo[bufnr].buftype == "" and M.matches(vim.api.nvim_buf_get_name(bufnr), globs)
end

return M
