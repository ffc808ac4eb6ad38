//! cotenant-policies: scheduling policies.
