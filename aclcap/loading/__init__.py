"""What every stage loads and nothing else: op libraries and model files. graph/ and meta/
both import it; it imports neither, so the stages never import each other."""
