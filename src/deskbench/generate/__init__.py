"""Generators of PDFs and benchmarks whose content is known by construction."""
