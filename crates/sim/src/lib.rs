//! cotenant-sim
