"""The command-line layer: the only part of ceg that imports typer and rich."""
