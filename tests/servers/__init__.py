"""Real local servers for the tests (Prometheus, moto, the BigQuery emulator) and their fault proxies."""
