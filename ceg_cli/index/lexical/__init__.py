"""The lexical half of an index: the BM25 part on bm25s or tantivy (``bm25``,
``lexical_tantivy``), how BM25 reads each language (``lexlang``), and indexes
built without vectors (``lexonly``).

A part of ``ceg_cli.index``: it may import the index's layout and directory
modules, never ``build`` or ``dense``.
"""
