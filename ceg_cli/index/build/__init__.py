"""Building an index directory: the builder, its options and work folder, chunking,
what a build does with an existing index, and the engines that read, chunk and
embed (local, reader processes, Ray).

A part of ``ceg_cli.index``: it may import the index's own modules, ``dense``
and ``lexical``; nothing in them imports it.
"""
