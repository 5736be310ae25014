"""aclcap's version, apart from the package's `__init__` (which imports the public sample API
from meta/) so that low layers, such as the AOTI cache key, can read it."""

import functools
import hashlib
from pathlib import Path

VERSION = "0.1.0"


@functools.cache
def code_fingerprint() -> str:
    """VERSION and a hash of this package's own Python sources (3 ms for 127 files), for
    the keys of what capture caches: an index or artifact written by other aclcap code is
    never read back. The version alone stayed 0.1.0 while the size ranges an export is split
    into changed, and a warm capture of mamba replayed an older run's range at a size its
    guards refuse (index out of bounds) where a cold one passed."""
    digest = hashlib.sha256()
    root = Path(__file__).parent
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return f"{VERSION}+{digest.hexdigest()[:16]}"
