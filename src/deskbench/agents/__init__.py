"""docqa agents: the BM25 MLLM agent (MADQA Algorithm 1), static RAG, oracle, and guess."""
