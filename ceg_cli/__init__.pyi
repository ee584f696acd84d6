# What type checkers see of ``import ceg_cli``: the API that __init__.py re-exports lazily.
from .api import SCHEMA_VERSION as SCHEMA_VERSION
from .api import CheckedSegment as CheckedSegment
from .api import Checker as Checker
from .api import CheckResult as CheckResult

__version__: str
__all__: list[str]
