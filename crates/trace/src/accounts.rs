//! Tenant account trees (Slurm fair share) read from TOML.
