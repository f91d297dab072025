"""The runtime: one turn of one session, and the model call it makes."""
