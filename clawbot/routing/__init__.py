"""Routing: where every inbound message enters, and the session it belongs to."""
