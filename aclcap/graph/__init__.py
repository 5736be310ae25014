"""The base capture and bench share: their common options, one step context, export,
padding and the capture backends."""
