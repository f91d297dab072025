"""Security: risk, approvals, audit, redaction, reach and the tool gate."""
