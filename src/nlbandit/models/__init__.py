"""Estimators shared by the policies: ridge regression with an incremental inverse, and more to come."""
