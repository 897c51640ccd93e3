"""The managed-RAG baselines of MADQA (paper §4 and Appendix G.2; github OxRML/MADQA
baselines/openai-file-search and baselines/gemini-file-search at 978fa76): the corpus's PDFs go
to a provider's store (OpenAI vector store, Gemini File Search store), which chunks, embeds and
retrieves on its own; each question is one request with the official prompt, and the answer and
citations are read from the reply as the official scripts read them.

Modules: prompts.py (what each script sends, and how it reads the reply), stores.py (one store
per corpus content, kept in the corpus folder, reused, listed and deleted), openai_fs.py and
gemini_fs.py (the two agents), episode.py (an answer as a deskbench episode), cli.py
(`deskbench stores`). docs/managed-rag.md says what each runs and what it costs."""
