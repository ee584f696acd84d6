"""ceg: Citation-Enhanced Generation as a batch fact-checker for LLM output."""

from __future__ import annotations

__version__ = "0.1.0"
