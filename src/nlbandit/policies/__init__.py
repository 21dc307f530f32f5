"""Bandit policies, each a short composition of shared estimators and exploration rules."""
