// Package units formats and parses the quantities batchfit shows people:
// byte counts and durations. It has no dependencies beyond the standard
// library, so a package that only needs a formatter does not pull in the UI.
package units
