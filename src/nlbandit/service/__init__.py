"""The bandit service: an online agent behind an HTTP API with a write-ahead journal and snapshots
(:mod:`nlbandit.service.app`, :mod:`nlbandit.service.journal`; ``nlbandit serve``)."""
