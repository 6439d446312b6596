// Package cost predicts how long a plan's steps take on real GPUs.
//
// Every collective is priced as nccl-tests measures it:
//
//	t = α + S·f(n) / busbw
//
// with S the message size as nccl-tests defines it (the full gathered or
// scattered buffer for Allgather, ReduceScatter, AllToAll, Gather and
// Scatter; the buffer for Allreduce, Broadcast, Reduce and SendRecv), n the
// team size and f the bus factor: (n−1)/n for Allgather, ReduceScatter,
// AllToAll, Gather and Scatter, 2(n−1)/n for Allreduce and 1 for Broadcast,
// Reduce and SendRecv. An AllToAllV (an all-to-all with split sizes) is
// priced on the AllToAll line at S·f(n) = the bytes its busiest member
// receives. α (latency) and busbw (bus bandwidth, 1e9 bytes a
// second) belong to a link class: NVLink when every member of a team is on
// one node, the network otherwise, with optional parameters per collective
// type. Local steps are priced by memory traffic. A [Topology] holds the
// parameters; [Default] is fitted to a 2×H200 NCCL calibration, and [Fit]
// fits a topology to any measurements in that CSV format.
//
// The package reads plans (internal/plan) and nothing else of nvcomm.
package cost
