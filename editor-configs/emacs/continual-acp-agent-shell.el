;;; continual-acp-agent-shell.el --- continual-acp for agent-shell -*- lexical-binding: t; -*-

;;; Commentary:
;; Registers continual-acp with xenodium/agent-shell (built on acp.el).
;; Load it after agent-shell, e.g. (with-eval-after-load 'agent-shell (load "/path/to/this/file.el")).
;; Start a session with M-x continual-acp-start.
;; Tested with: Emacs 30 + agent-shell 0.63.6 / acp.el 0.14.2 (agent-shell needs Emacs >= 29.1).
;; Use ABSOLUTE paths: an Emacs started from a desktop launcher may not see your shell's PATH or venv.

;;; Code:

(require 'agent-shell)

(defvar continual-acp-command
  '("/ABSOLUTE/PATH/TO/continual-acp/.venv/bin/continual-acp" "serve")
  "Program and arguments that start the continual-acp server over stdio.")

(defvar continual-acp-environment
  (agent-shell-make-environment-variables
   "OPENAI_API_KEY" (or (getenv "OPENAI_API_KEY") "")
   "OPENAI_BASE_URL" "https://api.openai.com/v1"
   "CONTINUAL_ACP_MODEL" "gpt-4.1")
  "Environment for the continual-acp process (secrets go here, not in your shell profile).")

(defun continual-acp-make-agent-config ()
  "Return the agent-shell configuration for continual-acp."
  (agent-shell-make-agent-config
   :identifier 'continual-acp
   :mode-line-name "continual-acp"
   :buffer-name "continual-acp"
   :shell-prompt "continual-acp> "
   :shell-prompt-regexp "continual-acp> "
   :welcome-function (lambda (config) (shell-maker-welcome-message config))
   :client-maker (lambda (buffer)
                   (agent-shell--make-acp-client
                    :command (car continual-acp-command)
                    :command-params (cdr continual-acp-command)
                    :environment-variables continual-acp-environment
                    :context-buffer buffer))))

(add-to-list 'agent-shell-agent-configs (continual-acp-make-agent-config) t)

(defun continual-acp-start ()
  "Start a new continual-acp shell."
  (interactive)
  (agent-shell--dwim :config (continual-acp-make-agent-config) :new-shell t))

(provide 'continual-acp-agent-shell)

;;; continual-acp-agent-shell.el ends here
