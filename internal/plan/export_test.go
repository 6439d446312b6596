package plan

// Decode's two paths, for BenchmarkDecode, which is in package plan_test
// because it lowers generated fusions (internal/lower imports this
// package).
var (
	FastDecode    = fastDecode
	LibraryDecode = decodeLibrary
)
