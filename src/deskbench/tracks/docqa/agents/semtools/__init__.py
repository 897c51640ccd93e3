"""MADQA's Claude agent with Semtools (Appendix G.4): semtools' search / parse / workspace in the
sandbox (cli.py), the Bash / Read / Glob / Grep tool server (shell.py), the staged corpus and its
process (host.py), the prompts (prompts.py) and the agent (agent.py)."""
