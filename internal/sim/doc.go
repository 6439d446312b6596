// Package sim executes a communication plan on virtual devices with real
// numbers and proves it against the unsharded program.
//
// [Run] fills every fusion input with deterministic integer-valued data,
// computes the unsharded reference of every op in float64 (sums,
// products, add, sub, mul, matmul and linear modulo a prime, so that any
// grouping a plan uses gives exactly the same values), shards the inputs
// onto the devices of their meshes,
// executes the plan's steps with the flat-buffer semantics of
// docs/plan.md, and after the last step of every op compares each device's
// buffer of the op's output with that device's shard of the reference,
// element for element. It also measures the bytes every
// device sends and receives and checks them against the plan's accounting.
//
// The shard of a tensor on a device ([Shard]) is rebuilt from the tensor's
// logical shape, schedule, allocation and mesh alone, by replaying the loop
// transforms on an explicit IterDomain graph. The package does not use the
// compiler's analyses, so a simulation is an independent check of a lowering.
package sim
