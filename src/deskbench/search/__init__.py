"""Page-level BM25 search over tantivy with the Whoosh query syntax MADQA agents used."""
