//! Throughput tables: steps per second of a job type on each GPU type, alone or co-located.
