-- continual-acp as an avante.nvim ACP provider.
-- Put this in your avante setup (lazy.nvim `opts`, or init.lua).
-- Tested with: not run by a real client here (avante's own requirements apply).
-- Use ABSOLUTE paths: Neovim started from a desktop launcher may not see your shell's PATH or venv.
require("avante").setup({
  provider = "continual-acp",
  acp_providers = {
    ["continual-acp"] = {
      command = "/ABSOLUTE/PATH/TO/continual-acp/.venv/bin/continual-acp",
      args = { "serve" },
      env = {
        OPENAI_API_KEY = os.getenv("OPENAI_API_KEY"),
        OPENAI_BASE_URL = "https://api.openai.com/v1",
        CONTINUAL_ACP_MODEL = "gpt-4.1",
      },
      timeout = 20000, -- ms
    },
  },
})
