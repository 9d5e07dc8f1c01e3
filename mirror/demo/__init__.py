"""The bundled demo site and its static server (`mirror demo`, tests, benchmarks)."""
