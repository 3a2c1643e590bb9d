"""Table schemas (pandera): one model per table, named for one row."""
