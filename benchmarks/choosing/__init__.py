"""Which scheme for a machine: every scheme ranked on a described machine by the time model
(choose_scheme), and the model checked against the papers' published times (scaling_model)."""
