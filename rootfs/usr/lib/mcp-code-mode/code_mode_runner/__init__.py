"""The runner: the sandbox side of mcp-code-mode (see /runner.py, its entry, for the
protocol and the module list)."""
