"""Whether a run survives being killed and restarted again and again (soak)."""
