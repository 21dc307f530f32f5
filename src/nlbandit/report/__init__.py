"""Reports: regret plots with confidence bands, markdown tables, and claim checks."""
