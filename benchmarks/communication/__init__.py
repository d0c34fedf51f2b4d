"""What moves between devices: the bytes each scheme's compiled step sends (comm_volume)."""
