"""clawbot: LLM agents in chat."""
