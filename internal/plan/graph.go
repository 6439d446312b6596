package plan

import "slices"

// ToGraph rewrites p, a plan of format 1, as a plan of format 2 that runs
// the same steps, each waiting only for what it must: every step runs on
// its kind's stream (collectives on comm, local steps on compute) and
// waits for the steps of another stream that last wrote a buffer it reads,
// or that last wrote or read since a buffer it writes, on a device they
// share. Steps of one stream keep their list order on each device, so a
// dependence within a stream needs no wait. Every order that the graph
// allows then computes what the list's does, and a collective whose
// inputs are ready may run while the computation before it goes on
// (cost.Schedule prices that overlap). p is changed in place; a plan of
// format 2 is left as it is.
func ToGraph(p *Plan) {
	if p.Graph() {
		return
	}
	p.Format = FormatGraph
	type access struct {
		write int   // the last step that wrote the buffer, -1 for none
		reads []int // the steps that read it since
	}
	buffers := map[bufferOn]*access{}
	at := func(b bufferOn) *access {
		a := buffers[b]
		if a == nil {
			a = &access{write: -1}
			buffers[b] = a
		}
		return a
	}
	for i := range p.Steps {
		s := &p.Steps[i]
		s.Stream, s.After = "", nil
		var after []int
		wait := func(j int) {
			if j >= 0 && p.Steps[j].StreamName() != s.StreamName() {
				after = append(after, j)
			}
		}
		for _, name := range s.Operands() {
			for _, d := range graphReaders(s) {
				wait(at(bufferOn{name, d}).write)
			}
		}
		for _, d := range writers(s) {
			a := at(bufferOn{s.Output, d})
			wait(a.write)
			for _, r := range a.reads {
				wait(r)
			}
		}
		slices.Sort(after)
		s.After = slices.Compact(after)
		for _, name := range s.Operands() {
			for _, d := range graphReaders(s) {
				a := at(bufferOn{name, d})
				a.reads = append(a.reads, i)
			}
		}
		for _, d := range writers(s) {
			a := at(bufferOn{s.Output, d})
			a.write, a.reads = i, nil
		}
	}
}
