"""The BM25 agent's protocols: the paper's loop and the official scripts' (registry.py)."""
