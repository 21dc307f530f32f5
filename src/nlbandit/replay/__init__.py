"""Logged-data evaluation: off-policy estimates of a policy's value from logged propensities
(:mod:`nlbandit.replay.estimators`)."""
