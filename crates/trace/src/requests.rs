//! LLM request traces (Azure LLM inference 2023, Mooncake 2024).
