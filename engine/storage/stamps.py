"""Format stamp values of ``omnigraph:format`` on ``__manifest`` main."""

FORMAT_4 = "4"
FORMAT_MIGRATING = "migrating"
FORMAT_5 = "5"
KNOWN_STAMPS = (FORMAT_4, FORMAT_MIGRATING, FORMAT_5)
