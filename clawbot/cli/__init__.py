"""The ``clawbot`` command line."""
