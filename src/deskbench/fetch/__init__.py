"""`deskbench fetch`: released benchmarks onto this machine, only when the user asks.

download.py  many files over HTTP at once: resumable, checksummed, retried, failures kept apart
snapshot.py  a Hugging Face dataset snapshot folder: its README's `configs:`, its parquet/JSONL rows,
             and the hub download that makes one (the user's token; gated repos said in one line)
madqa.py     MADQA (OxRML/MADQA): tasks per split, its PDFs, a corpus, the official OCR text
"""
