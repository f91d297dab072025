"""Tools the model can call: the registry and one module per tool family."""
