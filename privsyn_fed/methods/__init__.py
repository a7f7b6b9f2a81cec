"""Synthesis methods: coordinators that decide which statistics to ask the silos for."""
