"""Protocols, the simulation engine, hyperparameter declarations and PRNG stream handling."""
