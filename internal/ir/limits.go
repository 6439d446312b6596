package ir

// Structural limits of a fusion. They bound the work and memory of every
// later phase by the size of the file's real content: without them a 60 MB
// file with one 30-million-axis shape drove the parser past 24 GB. Both are
// far above any real program's (nvFuser's and PyTorch's tensors have a
// handful of axes and schedules of a few steps).
const (
	// MaxRank is the most logical axes a tensor may have.
	MaxRank = 64
	// MaxScheduleSteps is the most schedule steps a tensor may have.
	MaxScheduleSteps = 1024
)
