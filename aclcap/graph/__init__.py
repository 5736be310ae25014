"""The base capture and bench share: the model-file contract, one step context, export,
padding and the capture backends."""
