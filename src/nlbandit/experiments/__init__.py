"""Declarative experiment files: parsing, validation, grid expansion, and running them into the store."""
