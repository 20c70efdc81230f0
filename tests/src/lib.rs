//! End-to-end suites live in `tests/e2e/`; this library is intentionally empty.
