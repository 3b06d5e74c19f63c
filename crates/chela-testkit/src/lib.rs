//! Fakes for testing Chela.
