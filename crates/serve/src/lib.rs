//! cotenant-serve
