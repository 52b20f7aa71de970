"""Schema importers: published dialogue schemas -> editable, linted domain files.

`import_sgd(schema, out)` writes one domain per SGD service; `import_crosswoz(database_dir, out)`
writes CrossWOZ's five domains with gazetteers from its database. Both are what
`context-editor import sgd|crosswoz` runs.
"""

from ..errors import DatasetError
from .common import read_json
from .crosswoz import import_crosswoz
from .sgd import import_sgd

__all__ = ["import_sgd", "import_crosswoz", "read_json", "DatasetError"]
