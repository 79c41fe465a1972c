"""Rendering a comparison result for people: markdown for the terminal, PR comment, check run and summary."""
