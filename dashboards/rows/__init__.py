"""One module per dashboard row; each exposes ``ROW`` (title) and ``panels()``."""
