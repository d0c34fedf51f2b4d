"""The synchronous step, one module per backend (explicit, gspmd, pmap) and what they share."""
