//! Tests of the comparison on synthetic bundles.
