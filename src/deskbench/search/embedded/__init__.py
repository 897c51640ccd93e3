"""Embedding retrievers (dense text, visual single-vector, late interaction) and their page
vectors stored with the corpus. They import torch: only a run that asks for one loads them."""
