// Package shard is the vocabulary under nvcomm's phases: the element types
// and their sizes, the parallel types and the mesh axes they spread over,
// digits (the mixed-radix factors of an axis that shardings select),
// DTensor's placements (Shard, Replicate, Partial) and their notation, and
// the row-major (mixed-radix) numbering of positions in a mesh or a
// buffer. The fusion (internal/ir), the plan
// (internal/plan), the cost model and the lowering share it, so that one
// table and one decoding serve them all; the simulator keeps its own on
// purpose, as an independent oracle.
package shard

import (
	"maps"
	"slices"
)

// dtypeSizes maps each element type to its size in bytes.
var dtypeSizes = map[string]int{
	"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int32": 4, "int64": 8,
}

// DTypeSize is the size in bytes of an element of type name, 0 for a type
// nvcomm does not know.
func DTypeSize(name string) int { return dtypeSizes[name] }

// IsIntDType reports whether name is an integer element type (int32,
// int64): the dtypes of a lookup's indices.
func IsIntDType(name string) bool { return name == "int32" || name == "int64" }

// DTypeNames lists the element types, sorted.
func DTypeNames() []string { return slices.Sorted(maps.Keys(dtypeSizes)) }

// Coords returns the coordinates, in an array of the given shape, of the
// element at row-major index i (the last axis varies fastest).
func Coords(i int, shape []int) []int {
	c := make([]int, len(shape))
	for a := len(shape) - 1; a >= 0; a-- {
		c[a] = i % shape[a]
		i /= shape[a]
	}
	return c
}

// Index is the row-major index of coords in an array of the given shape:
// the inverse of Coords.
func Index(coords, shape []int) int {
	i := 0
	for a, c := range coords {
		i = i*shape[a] + c
	}
	return i
}

// Identity is the identity permutation of n positions: 0, 1, …, n−1.
func Identity(n int) []int {
	m := make([]int, n)
	for i := range m {
		m[i] = i
	}
	return m
}
