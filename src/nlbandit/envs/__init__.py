"""Bandit environments (pure functions, see :class:`nlbandit.core.types.Env`)."""
