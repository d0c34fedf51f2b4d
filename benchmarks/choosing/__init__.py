"""Which scheme for a machine: the time model checked against the papers' published times
(scaling_model)."""
