//! cotenant-report
