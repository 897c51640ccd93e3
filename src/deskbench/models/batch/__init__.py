"""Provider batch APIs (OpenAI Batch, Anthropic Message Batches, Gemini batch mode) behind one
ChatModel: models/batch/base.py holds the protocol and the BatchedModel, one module per provider."""
