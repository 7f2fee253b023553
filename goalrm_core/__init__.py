"""goalrm: goal-conditioned reward models (Nath, Slack et al., NeurIPS 2024)."""

__version__ = "0.1.0"
