"""Outputs: render a Diagnosis; they never recompute it."""
