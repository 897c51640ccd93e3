"""Page-level search as MADQA's official tool searches: Whoosh 2.7.4's query syntax, analyzer and BM25F
scoring, over numpy postings."""
