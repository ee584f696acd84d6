"""The dense half of an index: embedders (torch, ONNX, packaged multilingual,
static), where and how they compute, and the FAISS index types of
``vectors.faiss`` (flat, HNSW, IVF-PQ, fast-scan, two-level k-means, tuning,
search width).

A part of ``ceg_cli.index``: it may import the index's layout and directory
modules, never ``build`` or ``lexical``.
"""
