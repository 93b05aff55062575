"""bench/run's modules: allocators, jobs, execution, tables, report, charts."""
