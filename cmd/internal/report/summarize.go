package report

import (
	"fmt"
	"io"

	"github.com/torchmem/torchmem/cmd/internal/escape"
	"github.com/torchmem/torchmem/memtimeline"
)

// SummaryWritten says that summarize wrote the summary out of src (of
// kind), out bytes from in bytes (in <= 0: the input's size is unknown).
func SummaryWritten(w io.Writer, src, out, kind string, outBytes, inBytes int64) {
	share := ""
	if inBytes > 0 {
		share = fmt.Sprintf(", %.2f%% of %s", 100*float64(outBytes)/float64(inBytes), memtimeline.FormatBytes(inBytes))
	}
	fmt.Fprintf(w, "%s -> %s (%s, %s%s)\n", escape.Terminal(src), escape.Terminal(out), kind, memtimeline.FormatBytes(outBytes), share)
}

// EmptyShard says that summarize's shard index of count holds no input.
func EmptyShard(w io.Writer, index, count int64) {
	fmt.Fprintf(w, "shard %d/%d: no inputs in this shard\n", index, count)
}
