"""Figure functions of the report specs: ``figure(ok_records, spec) -> matplotlib Figure``."""
