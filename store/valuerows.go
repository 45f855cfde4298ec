package store

import "strings"

// placeholders returns a parenthesized list of n placeholders, "(?, ?)":
// an IN list, or one row of a VALUES list.
func placeholders(n int) string {
	return "(" + strings.Repeat("?, ", n-1) + "?)"
}

// valueRows returns the VALUES list of a multi-row INSERT: n rows of cols
// placeholders each, "(?, ?), (?, ?)".
func valueRows(n, cols int) string {
	row := placeholders(cols)
	return strings.Repeat(row+", ", n-1) + row
}
