package sim

// put gives device d a buffer called name, as a step that wrote it would.
func (m *machine) put(d int, name string, b []float64) {
	m.output(name, 1)[d] = stored(b)
}
