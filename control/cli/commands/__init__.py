"""The ``hookyard`` commands, one module per group; each adds its parsers to the entry point's."""
