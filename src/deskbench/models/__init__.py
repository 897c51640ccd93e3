"""Chat models behind one protocol: OpenAI-compatible endpoints, Anthropic, a local llama.cpp server;
wrapped with retries, a concurrency limit, a response cache and usage accounting."""
