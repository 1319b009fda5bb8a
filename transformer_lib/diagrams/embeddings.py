# Hand-written tool module (not generated from a notebook).
"""Diagrams."""
