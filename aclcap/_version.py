"""aclcap's version, apart from the package's `__init__` (which imports the public sample API
from meta/) so that low layers, such as the AOTI cache key, can read it."""

VERSION = "0.1.0"
