-- piflow's TypeScript server plugin for ts_ls / vtsls: the bundled editors/typescript-plugin,
-- made findable by tsserver, which loads plugins by package name from `<location>/node_modules`.
local compat = require("piflow.compat")

local M = {}

M.name = "piflow-typescript-plugin"

--- The plugin directory of this checkout: editors/typescript-plugin beside editors/nvim.
function M.bundled_dir()
  local this_file = debug.getinfo(1, "S").source:sub(2) -- editors/nvim/lua/piflow/typescript.lua
  return vim.fn.fnamemodify(this_file, ":p:h:h:h:h") .. "/typescript-plugin"
end

--- A directory whose node_modules/piflow-typescript-plugin is a link to `dir`, made (or
--- repointed, after the checkout moved) under Neovim's data directory.
local function probe_location(dir)
  local location = vim.fn.stdpath("data") .. "/piflow/typescript"
  local link = location .. "/node_modules/" .. M.name
  if compat.uv.fs_readlink(link) == dir then
    return location
  end
  vim.fn.mkdir(location .. "/node_modules", "p")
  if compat.uv.fs_lstat(link) then
    assert(compat.uv.fs_unlink(link))
  end
  -- A junction on Windows needs no privilege; elsewhere the flag is ignored.
  local ok, err = compat.uv.fs_symlink(dir, link, { junction = true })
  if not ok then
    error(string.format("piflow.typescript_plugin: cannot link %s to %s: %s", link, dir, err), 0)
  end
  return location
end

--- The entry for ts_ls / vtsls `init_options.plugins`: { name, location, languages }.
function M.plugin()
  local dir = M.bundled_dir()
  if vim.fn.filereadable(dir .. "/index.js") ~= 1 then
    error(string.format("piflow.typescript_plugin: %s/index.js not found (the plugin comes with the piflow "
      .. "repository's editors/ directory)", dir), 0)
  end
  return { name = M.name, location = probe_location(dir), languages = { "javascript" } }
end

return M
