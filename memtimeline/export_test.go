package memtimeline

// For the external tests (package memtimeline_test), which may import the
// reader packages that import memtimeline.
var CheckDownsampled = checkDownsampled
