-- continual-acp as a CodeCompanion.nvim ACP adapter.
-- Put this in your CodeCompanion setup (lazy.nvim `opts`/`config`, or init.lua).
-- Use ABSOLUTE paths: Neovim started from a desktop launcher may not see your shell's PATH or venv.
-- The adapter extends the built-in `goose` ACP adapter because it has no authentication step.
-- Tested with: Neovim 0.11 + CodeCompanion.nvim v19.22.0 (needs Neovim >= 0.11).
-- `verbose_output = true` makes a finished cell card show its code and output, not only
-- `Execute: <title>`.
require("codecompanion").setup({
  adapters = {
    acp = {
      continual_acp = function()
        return require("codecompanion.adapters").extend("goose", {
          name = "continual_acp",
          formatted_name = "continual-acp",
          commands = {
            default = { "/ABSOLUTE/PATH/TO/continual-acp/.venv/bin/continual-acp", "serve" },
          },
          env = {
            OPENAI_API_KEY = "OPENAI_API_KEY", -- read from your environment by CodeCompanion
            OPENAI_BASE_URL = "https://api.openai.com/v1",
            CONTINUAL_ACP_MODEL = "gpt-4.1",
          },
          opts = {
            vision = true,
            verbose_output = true, -- show each cell's code and output in the chat
          },
          defaults = {
            mcpServers = {},
            timeout = 20000, -- ms; session/new answers fast, the kernel warms in the background
          },
        })
      end,
    },
  },
  -- Older CodeCompanion releases call this table `strategies` instead of `interactions`.
  interactions = {
    chat = { adapter = "continual_acp" },
  },
})
