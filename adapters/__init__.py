"""Channel adapters, one module per platform. They import only clawbot's public interface."""
