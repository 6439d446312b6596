package plan

// What the validator knows of each name, a tensor's or a buffer's, in one
// map. A step's checks ask about its input and output a score of times
// (is it a tensor, which op writes it, which steps wrote and read it, who
// holds it): one map a fact made each question a lookup in a map of all
// the plan's names, most of validating a plan of many steps.

// nameInfo is what the validator knows of one name.
type nameInfo struct {
	// tensor is the name's first tensor declaration, nil when no tensor
	// has the name.
	tensor *tensorInfo
	// written is set when some op writes the tensor; writer is the first.
	written bool
	writer  int
	// writes and reads are the steps that write and read the buffer, in
	// order (indexBuffers).
	writes writes
	reads  []int
	// held is the devices that hold the buffer after the steps checked so
	// far; nil until a step writes it.
	held *deviceSet
	// at is the position of the name's first tensor plus one, 0 when no
	// tensor has the name.
	at int32
}

// nameSlabSize is how many nameInfos the validator allocates at once.
const nameSlabSize = 1024

// recentNames is how many names lookup remembers: a step's input and
// output, and an operand or two of its op.
const recentNames = 4

// lookup returns what is known of name, nil when nothing is. The last
// names found are compared before the map is searched.
func (v *validator) lookup(name string) *nameInfo {
	for _, r := range &v.recent {
		if r.info != nil && r.name == name {
			return r.info
		}
	}
	if e := v.nextTensor(name); e != nil {
		v.remember(name, e)
		return e
	}
	e := v.names[name]
	if e != nil {
		v.remember(name, e)
		if e.at > 0 {
			v.cursors[v.nextCursor] = int(e.at) - 1
			v.nextCursor = (v.nextCursor + 1) % tensorCursors
		}
	}
	return e
}

// tensorCursors is how many runs of tensors nextTensor follows at once.
const tensorCursors = 4

// nextTensor returns the record of name when it is the name of the tensor
// after one of the last found (v.cursors), nil otherwise. The ops of a
// chain read and write the tensors in their order, and so do their steps;
// ops that read fusion inputs, which a plan lists before the ops'
// outputs, read one run of tensors and write another, and a chain of
// layer ops beside them a third: following a few runs spares most lookups
// in the map of every name, which misses the processor's caches.
func (v *validator) nextTensor(name string) *nameInfo {
	for c, at := range v.cursors {
		k := at + 1
		if k >= len(v.tensorEntries) || v.p.Tensors[k].Name != name {
			continue
		}
		e := v.tensorEntries[k] // nil until checkTensors records it
		if e != nil {
			v.cursors[c] = k
		}
		return e
	}
	return nil
}

// stepOutput returns the record of step i's output, found by
// indexBuffers, and remembers it for the lookups of the step's checks.
func (v *validator) stepOutput(i int) *nameInfo {
	e := v.stepOutputs[i]
	v.remember(v.p.Steps[i].Output, e)
	return e
}

// outputEntry returns the record of step s's output: its op's output
// record, found by checkOps, when it writes the op's output.
func (v *validator) outputEntry(s *Step) *nameInfo {
	if s.Op >= 0 && s.Op < len(v.p.Ops) && v.p.Ops[s.Op].Output == s.Output {
		e := v.opOutputs[s.Op]
		v.remember(s.Output, e)
		return e
	}
	return v.entry(s.Output)
}

// remember puts a name lookup found among the recent ones.
func (v *validator) remember(name string, e *nameInfo) {
	v.recent[v.nextRecent] = recentName{name, e}
	v.nextRecent = (v.nextRecent + 1) % recentNames
}

// recentName is a name lookup found.
type recentName struct {
	name string
	info *nameInfo
}

// entry returns what is known of name, recording it empty when nothing
// is.
func (v *validator) entry(name string) *nameInfo {
	if e := v.lookup(name); e != nil {
		return e
	}
	if len(v.nameSlab) == cap(v.nameSlab) {
		v.nameSlab = make([]nameInfo, 0, nameSlabSize)
	}
	v.nameSlab = v.nameSlab[:len(v.nameSlab)+1]
	e := &v.nameSlab[len(v.nameSlab)-1]
	v.names[name] = e
	return e
}

// tensor returns the first declaration of tensor name, nil when there is
// none.
func (v *validator) tensor(name string) *tensorInfo {
	if e := v.lookup(name); e != nil {
		return e.tensor
	}
	return nil
}

// writesOf returns the steps that write buffer name, nil when none does.
func (v *validator) writesOf(name string) *writes {
	if e := v.lookup(name); e != nil && len(e.writes.steps) > 0 {
		return &e.writes
	}
	return nil
}

// readsOf returns the steps that read buffer name, in order.
func (v *validator) readsOf(name string) []int {
	if e := v.lookup(name); e != nil {
		return e.reads
	}
	return nil
}

// heldBy returns the devices that hold buffer name, nil when no step has
// written it yet.
func (v *validator) heldBy(name string) *deviceSet {
	if e := v.lookup(name); e != nil {
		return e.held
	}
	return nil
}
