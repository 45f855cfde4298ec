package httpapi

// Routes returns the "METHOD pattern" of every route Handler registers.
func Routes() []string {
	var out []string
	for _, rt := range (&Server{}).routes() {
		out = append(out, rt.method+" "+rt.pattern)
	}
	return out
}

// MappedStatus returns the status code maps to, and whether it has an
// entry of its own (not the fallback for unknown codes).
func MappedStatus(code string) (int, bool) {
	s, ok := statuses[code]
	return s, ok
}
