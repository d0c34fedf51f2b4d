"""Loaded by pytest before it starts any test process. Importing it imports tests/__init__.py here
too, so under pytest-xdist (`-n 2`) the controlling process creates the compilation cache
directory and puts it in the environment before the workers start: both workers and every
`main.py` they run share one cache, and a program compiled by one is read by the others."""
