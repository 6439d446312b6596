package ir

// Renamed returns a tensor alike t under another name and with no
// producer, nor a Combined (what an op computes into pending terms is its
// producer's): the same mesh, dtype, domains, schedule, allocation and
// analyses, which it shares with t (none of them changes once a tensor is
// built). For a t that NewTensor returned, it is what NewTensor returns
// for the same spec under that name, in a fraction of the time:
// lower.Certify builds each distinct spec of a plan's tensors once (a
// chain of 100k tensors has a few).
func (t *Tensor) Renamed(name string) *Tensor {
	c := new(Tensor)
	t.RenamedInto(c, name)
	return c
}

// RenamedInto makes *dst what t.Renamed(name) returns, in memory the
// caller holds (lower.Certify's slab of a plan's tensors): dst shares t's
// TensorDomain.
func (t *Tensor) RenamedInto(dst *Tensor, name string) {
	*dst = *t
	dst.Name, dst.Producer, dst.Combined = name, nil, nil
}
