//! Gavel's `simulation_throughputs.json`: steps per second per (job type, scale factor) and GPU type.
